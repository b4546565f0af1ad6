// Command wg-gro is the Go half of benches/gro-peers (run by
// benches/gro-peers.sh, never by CI): wireguard-go's TUN GRO
// (golang.zx2c4.com/wireguard/tun, fetched from the Go module proxy at
// build time) over the frame trains the Rust harness writes, batch by
// batch, timed exactly as the other harnesses time their engines.
//
// wireguard-go keeps its GRO unexported: NativeTun.Write runs
// handleGRO(bufs, offset, tcpTable, udpTable, canUDPGRO, &toWrite) and then
// writes each buffer in toWrite to the TUN fd. This harness calls the same
// functions through go:linkname, so that only the GRO is timed, not the
// write system calls. The tables are passed as opaque pointers made by
// the package's own constructors and reset by its own methods, as
// NativeTun.Write does before every batch.
//
// Usage: wg-gro PCAP [-batch N] [-reps N]
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"unsafe"

	_ "golang.zx2c4.com/wireguard/tun"
	"golang.org/x/sys/unix"
)

//go:linkname handleGRO golang.zx2c4.com/wireguard/tun.handleGRO
func handleGRO(bufs [][]byte, offset int, tcpTable unsafe.Pointer, udpTable unsafe.Pointer, canUDPGRO bool, toWrite *[]int) error

//go:linkname newTCPGROTable golang.zx2c4.com/wireguard/tun.newTCPGROTable
func newTCPGROTable() unsafe.Pointer

//go:linkname newUDPGROTable golang.zx2c4.com/wireguard/tun.newUDPGROTable
func newUDPGROTable() unsafe.Pointer

//go:linkname tcpReset golang.zx2c4.com/wireguard/tun.(*tcpGROTable).reset
func tcpReset(t unsafe.Pointer)

//go:linkname udpReset golang.zx2c4.com/wireguard/tun.(*udpGROTable).reset
func udpReset(t unsafe.Pointer)

// ethLen: the Ethernet header of each frame is the headroom (offset) that
// handleGRO needs for the 10-byte virtio header.
const ethLen = 14

func readPcap(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b2c3d4 || binary.LittleEndian.Uint32(b[20:]) != 1 {
		return nil, fmt.Errorf("%s: not a little-endian Ethernet pcap", path)
	}
	var frames [][]byte
	for at := 24; at < len(b); {
		if at+16 > len(b) {
			return nil, fmt.Errorf("%s: frame %d: truncated record header", path, len(frames)+1)
		}
		n := int(binary.LittleEndian.Uint32(b[at+8:]))
		at += 16
		if at+n > len(b) {
			return nil, fmt.Errorf("%s: frame %d: truncated data", path, len(frames)+1)
		}
		frames = append(frames, b[at:at+n])
		at += n
	}
	return frames, nil
}

func threadCPUNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}

func clockOverheadNs() int64 {
	v := make([]int64, 1001)
	for i := range v {
		t0 := threadCPUNs()
		v[i] = threadCPUNs() - t0
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[len(v)/2]
}

func main() {
	batch := flag.Int("batch", 128, "frames per batch (conn.IdealBatchSize is 128)")
	reps := flag.Int("reps", 30, "timed trains")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: wg-gro PCAP [-batch N] [-reps N]")
		os.Exit(2)
	}
	path := flag.Arg(0)
	frames, err := readPcap(path)
	if err != nil || len(frames) == 0 {
		fmt.Fprintln(os.Stderr, "wg-gro:", err, "(no frames?)")
		os.Exit(1)
	}
	// One OS thread, no garbage collection during the timing: the CPU
	// clock is the thread's, and nothing else runs on it.
	runtime.LockOSThread()
	debug.SetGCPercent(-1)

	// The receive buffers: batch buffers of 64 KiB capacity (wireguard-go
	// coalesces in place, appending to the first packet's buffer; its
	// device buffers are MaxMessageSize, 65535 bytes).
	store := make([][]byte, *batch)
	for i := range store {
		store[i] = make([]byte, 0, 65536+ethLen)
	}
	bufs := make([][]byte, *batch)
	tcpTable, udpTable := newTCPGROTable(), newUDPGROTable()
	toWrite := make([]int, 0, *batch)
	marker := []byte(strings.Repeat("\xa5", 10))
	overhead := clockOverheadNs()

	var samples []float64
	firstOut := int64(-1)
	for rep := 0; rep <= *reps; rep++ {
		var ns, out int64
		for start := 0; start < len(frames); start += *batch {
			end := min(start+*batch, len(frames))
			n := end - start
			// Load (untimed): the batch lands in the receive buffers.
			for i := 0; i < n; i++ {
				bufs[i] = append(store[i][:0], frames[start+i]...)
				copy(bufs[i][ethLen-10:ethLen], marker)
			}
			t0 := threadCPUNs()
			// What NativeTun.Write does before writing: reset, GRO.
			tcpReset(tcpTable)
			udpReset(udpTable)
			toWrite = toWrite[:0]
			if err := handleGRO(bufs[:n], ethLen, tcpTable, udpTable, false, &toWrite); err != nil {
				fmt.Fprintln(os.Stderr, "wg-gro: handleGRO:", err)
				os.Exit(1)
			}
			dt := threadCPUNs() - t0 - overhead
			if dt > 0 {
				ns += dt
			}
			out += int64(len(toWrite))
		}
		if firstOut < 0 {
			firstOut = out
		} else if out != firstOut {
			fmt.Fprintf(os.Stderr, "wg-gro: %d packets out, %d before\n", out, firstOut)
			os.Exit(1)
		}
		if rep > 0 {
			samples = append(samples, float64(ns)/float64(len(frames)))
		}
	}
	sort.Float64s(samples)
	med := samples[len(samples)/2]
	if len(samples)%2 == 0 {
		med = (samples[len(samples)/2-1] + samples[len(samples)/2]) / 2
	}
	caseName := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	fmt.Printf("RESULT engine=wireguard-go case=%s frames=%d batch=%d out=%d ns_per_frame=%.1f\n",
		caseName, len(frames), *batch, firstOut, med)
}
