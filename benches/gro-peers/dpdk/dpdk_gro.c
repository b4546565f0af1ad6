/*
 * dpdk-gro: the C half of benches/gro-peers (run by benches/gro-peers.sh,
 * never by CI). DPDK's lib/gro (Debian's libdpdk-dev, installed at build
 * time) over the frame trains the Rust harness writes, batch by batch,
 * timed exactly as the other harnesses time their engines.
 *
 * The EAL runs without hugepages or PCI (--no-huge --no-pci --no-shconf):
 * only the mbuf pool and lib/gro are used, no device. Each batch is copied,
 * untimed, into freshly allocated mbufs (as a PMD's receive burst would hand
 * them over), then rte_gro_reassemble_burst() (the lightweight mode, one
 * call per burst of at most RTE_GRO_MAX_BURST_ITEM_NUM packets) is timed.
 *
 * Two engines:
 *   dpdk        packet_type and l2/l3/l4_len set at load (untimed), as a
 *               NIC that classifies packets in hardware would hand them;
 *   dpdk-parse  the same, but rte_net_get_ptype() parses each packet
 *               inside the timing (a NIC without packet-type offload).
 * DPDK 22.11 (Debian 12) has no TCP/IPv6 GRO: IPv6 trains are refused.
 *
 * Usage: dpdk-gro ENGINE PCAP [BATCH [REPS]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_gro.h>
#include <rte_mbuf.h>
#include <rte_net.h>

struct frame {
	uint8_t *data;
	uint32_t len;
};

static struct frame *read_pcap(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "dpdk-gro: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	uint32_t gh[6];
	if (fread(gh, 4, 6, f) != 6 || gh[0] != 0xa1b2c3d4u || gh[5] != 1) {
		fprintf(stderr, "dpdk-gro: %s: not a little-endian Ethernet pcap\n", path);
		fclose(f);
		return NULL;
	}
	size_t cap = 4096, cnt = 0;
	struct frame *fr = malloc(cap * sizeof(*fr));
	uint32_t rh[4];
	while (fr && fread(rh, 4, 4, f) == 4) {
		if (rh[2] > 65535) {
			fprintf(stderr, "dpdk-gro: %s: frame %zu: length %u\n", path, cnt + 1, rh[2]);
			exit(1);
		}
		if (cnt == cap) {
			cap *= 2;
			fr = realloc(fr, cap * sizeof(*fr));
		}
		fr[cnt].len = rh[2];
		fr[cnt].data = malloc(rh[2]);
		if (fread(fr[cnt].data, 1, rh[2], f) != rh[2]) {
			fprintf(stderr, "dpdk-gro: %s: frame %zu: truncated\n", path, cnt + 1);
			exit(1);
		}
		cnt++;
	}
	fclose(f);
	*n = cnt;
	return fr;
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int64_t clock_overhead_ns(void)
{
	int64_t v[1001];
	for (int i = 0; i < 1001; i++) {
		int64_t t0 = thread_cpu_ns();
		v[i] = thread_cpu_ns() - t0;
	}
	qsort(v, 1001, sizeof(v[0]), cmp_i64);
	return v[500];
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: dpdk-gro dpdk|dpdk-parse PCAP [BATCH [REPS]]\n");
		return 2;
	}
	const char *engine = argv[1], *path = argv[2];
	int parse = strcmp(engine, "dpdk-parse") == 0;
	if (!parse && strcmp(engine, "dpdk") != 0) {
		fprintf(stderr, "dpdk-gro: unknown engine %s\n", engine);
		return 2;
	}
	unsigned batch = argc > 3 ? (unsigned)atoi(argv[3]) : 128;
	int reps = argc > 4 ? atoi(argv[4]) : 30;
	if (batch < 1 || batch > RTE_GRO_MAX_BURST_ITEM_NUM || reps < 1) {
		fprintf(stderr, "dpdk-gro: batch 1..%u, reps >= 1\n", RTE_GRO_MAX_BURST_ITEM_NUM);
		return 2;
	}
	size_t nframes = 0;
	struct frame *frames = read_pcap(path, &nframes);
	if (!frames || nframes == 0)
		return 1;
	for (size_t i = 0; i < nframes; i++) {
		const uint8_t *d = frames[i].data;
		if (frames[i].len < 54 || d[12] != 0x08 || d[13] != 0x00 || d[23] != 6) {
			fprintf(stderr, "dpdk-gro: %s: frame %zu is not TCP/IPv4 (DPDK 22.11 lib/gro has no TCP/IPv6)\n", path, i + 1);
			return 3;
		}
	}

	/* The EAL on the CPU this process is pinned to. */
	cpu_set_t set;
	int cpu = 0;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &set); cpu++)
			;
	char lcore[16];
	snprintf(lcore, sizeof(lcore), "%d", cpu);
	char *eal[] = {"dpdk-gro", "--no-huge", "--no-pci", "--no-shconf", "-m", "256",
		       "-l", lcore, "--log-level", "error", NULL};
	if (rte_eal_init(10, eal) < 0) {
		fprintf(stderr, "dpdk-gro: rte_eal_init: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	struct rte_mempool *pool = rte_pktmbuf_pool_create("gro_peers", 4095, 0, 0,
							   RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
	if (!pool) {
		fprintf(stderr, "dpdk-gro: mbuf pool: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	struct rte_gro_param param = {
		.gro_types = RTE_GRO_TCP_IPV4,
		.max_flow_num = RTE_GRO_MAX_BURST_ITEM_NUM,
		.max_item_per_flow = RTE_GRO_MAX_BURST_ITEM_NUM,
		.socket_id = SOCKET_ID_ANY,
	};
	struct rte_mbuf *pkts[RTE_GRO_MAX_BURST_ITEM_NUM];
	int64_t overhead = clock_overhead_ns();
	double *samples = calloc((size_t)reps, sizeof(double));
	long first_out = -1;
	for (int rep = 0; rep <= reps; rep++) {
		int64_t ns = 0;
		long out = 0;
		for (size_t start = 0; start < nframes; start += batch) {
			unsigned n = (unsigned)(nframes - start < batch ? nframes - start : batch);
			/* Load (untimed): a receive burst in fresh mbufs. */
			for (unsigned i = 0; i < n; i++) {
				const struct frame *fr = &frames[start + i];
				struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
				if (!m) {
					fprintf(stderr, "dpdk-gro: mbuf pool empty\n");
					return 1;
				}
				memcpy(rte_pktmbuf_mtod(m, void *), fr->data, fr->len);
				m->data_len = (uint16_t)fr->len;
				m->pkt_len = fr->len;
				if (!parse) {
					m->packet_type = RTE_PTYPE_L2_ETHER | RTE_PTYPE_L3_IPV4 | RTE_PTYPE_L4_TCP;
					m->l2_len = 14;
					m->l3_len = (fr->data[14] & 0xf) * 4;
					m->l4_len = (fr->data[14 + m->l3_len + 12] >> 4) * 4;
				}
				pkts[i] = m;
			}
			int64_t t0 = thread_cpu_ns();
			if (parse) {
				for (unsigned i = 0; i < n; i++) {
					struct rte_net_hdr_lens hl;
					pkts[i]->packet_type = rte_net_get_ptype(pkts[i], &hl, RTE_PTYPE_ALL_MASK);
					pkts[i]->l2_len = hl.l2_len;
					pkts[i]->l3_len = hl.l3_len;
					pkts[i]->l4_len = hl.l4_len;
				}
			}
			uint16_t got = rte_gro_reassemble_burst(pkts, (uint16_t)n, &param);
			int64_t dt = thread_cpu_ns() - t0 - overhead;
			ns += dt > 0 ? dt : 0;
			out += got;
			/* Untimed: the burst's packets (and their chained segments) go back. */
			for (unsigned i = 0; i < got; i++)
				rte_pktmbuf_free(pkts[i]);
		}
		if (first_out < 0)
			first_out = out;
		else if (out != first_out) {
			fprintf(stderr, "dpdk-gro: %ld packets out, %ld before\n", out, first_out);
			return 1;
		}
		if (rep > 0)
			samples[rep - 1] = (double)ns / (double)nframes;
	}
	qsort(samples, (size_t)reps, sizeof(double), cmp_dbl);
	double med = reps % 2 ? samples[reps / 2] : (samples[reps / 2 - 1] + samples[reps / 2]) / 2;
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	char name[256];
	snprintf(name, sizeof(name), "%s", base);
	char *dot = strrchr(name, '.');
	if (dot)
		*dot = 0;
	printf("RESULT engine=%s case=%s frames=%zu batch=%u out=%ld ns_per_frame=%.1f\n", engine, name,
	       nframes, batch, first_out, med);
	rte_eal_cleanup();
	return 0;
}
