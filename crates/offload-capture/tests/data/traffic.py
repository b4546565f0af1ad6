# Loopback traffic for make-fixtures.sh: one TCP exchange and three UDP datagrams.
import socket, threading, time, sys
port = int(sys.argv[1])
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind(('127.0.0.1', port)); srv.listen(1)
def serve():
    c, _ = srv.accept()
    while True:
        d = c.recv(100000)
        if not d: break
        c.sendall(b'ok')
    c.close()
t = threading.Thread(target=serve); t.start()
cl = socket.create_connection(('127.0.0.1', port))
for n in (100, 3000, 20000, 9000):
    cl.sendall(bytes(n)); cl.recv(10); time.sleep(0.05)
cl.close(); t.join()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3): u.sendto(b'x' * (50 + i), ('127.0.0.1', port + 1)); time.sleep(0.01)
