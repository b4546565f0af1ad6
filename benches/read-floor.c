/* The floor of reading a capture: read(2) a file into a 1 MiB buffer and
 * touch one byte per cache line, nothing else (docs/performance.md, "The
 * read buffer on a huge page"). HUGE=1 puts the buffer on a 2 MiB
 * transparent huge page (MADV_HUGEPAGE), as offload-capture's reader does
 * for large files (decision 0233).
 *
 *   cc -O2 benches/read-floor.c -o /tmp/read-floor
 *   perf stat -r 11 -e task-clock /tmp/read-floor FILE 0   # small pages
 *   perf stat -r 11 -e task-clock /tmp/read-floor FILE 1   # huge page
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FILE HUGE(0|1)\n", argv[0]);
        return 2;
    }
    const size_t len = 1 << 20, huge_page = 2 << 20;
    char *buf;
    if (atoi(argv[2])) {
        char *map = mmap(NULL, 2 * huge_page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        buf = (char *)(((uintptr_t)map + huge_page - 1) & ~(uintptr_t)(huge_page - 1));
        madvise(buf, huge_page, MADV_HUGEPAGE);
    } else {
        buf = malloc(len);
    }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0 || !buf) {
        perror(argv[1]);
        return 1;
    }
    ssize_t n;
    uint64_t sum = 0;
    while ((n = read(fd, buf, len)) > 0)
        for (ssize_t i = 0; i < n; i += 64)
            sum += (unsigned char)buf[i];
    printf("%llu\n", (unsigned long long)sum);
    return 0;
}
