//! The kernel's own GRO selftest cases (`tools/testing/selftests/net/lib/gro.c`),
//! one named test per case and family (IPv4, IPv6, IPIP, IPv6 in IPv6, and
//! the same cases carried by GRE without options, with a key, with a
//! checksum, with a checksum and a key),
//! each run through the live kernel's GRO and through the engine with the
//! running kernel's profile, compared byte for byte and on the
//! `virtio_net_hdr` GSO metadata (`gso_size`, `gso_type`) the kernel
//! reports for each packet. The packets are rebuilt by
//! [`offload_conformance::selftest`] from the selftest's description.
//!
//! Needs root and /dev/net/tun; fails, never skips, where it cannot run.

use offload_conformance::selftest::{case, Family};
use offload_conformance::{compare_case, oracle_addrs};
use offload_lab::oracle::{GroKnobs, KernelGro};

fn run(family: Family, name: &'static str) {
    let mut kernel =
        KernelGro::new(GroKnobs::default()).expect("the kernel oracle needs root and /dev/net/tun");
    kernel.set_gso_meta(true).expect("PACKET_VNET_HDR capture");
    let a = oracle_addrs(&kernel);
    let c = case(&a, family, name).expect("a selftest case");
    if let Some(diff) = compare_case(&mut kernel, &c) {
        panic!(
            "selftest {} {name}: the engine differs from the kernel\n{diff}",
            family.name()
        );
    }
}

macro_rules! cases {
    ($family:ident, $variant:ident: $($case:ident),* $(,)?) => {
        mod $family {
            use super::*;
            $(
                #[test]
                #[ignore = "needs root: scripts/test.sh runs it"]
                fn $case() {
                    run(Family::$variant, stringify!($case));
                }
            )*
        }
    };
}

cases!(ipv4, Ipv4:
    data_same,
    data_lrg_sml,
    data_lrg_1byte,
    data_sml_lrg,
    data_burst,
    ack,
    flags_psh,
    flags_syn,
    flags_rst,
    flags_urg,
    flags_cwr,
    tcp_csum,
    tcp_seq,
    tcp_ts,
    tcp_opt,
    ip_ecn,
    ip_tos,
    ip_ttl,
    ip_opt,
    ip_frag4,
    ip_id_df1_inc,
    ip_id_df1_fixed,
    ip_id_df0_inc,
    ip_id_df0_fixed,
    ip_id_df1_inc_fixed,
    ip_id_df1_fixed_inc,
    large_max,
    large_rem,
    single,
    capacity,
);

cases!(ipv6, Ipv6:
    data_same,
    data_lrg_sml,
    data_lrg_1byte,
    data_sml_lrg,
    data_burst,
    ack,
    flags_psh,
    flags_syn,
    flags_rst,
    flags_urg,
    flags_cwr,
    tcp_csum,
    tcp_seq,
    tcp_ts,
    tcp_opt,
    ip_ecn,
    ip_tos,
    ip_frag6,
    ip_v6ext_same,
    ip_v6ext_diff,
    large_max,
    large_rem,
    single,
    capacity,
);

cases!(ipip, Ipip:
    data_same,
    data_lrg_sml,
    data_lrg_1byte,
    data_sml_lrg,
    data_burst,
    ack,
    flags_psh,
    flags_syn,
    flags_rst,
    flags_urg,
    flags_cwr,
    tcp_csum,
    tcp_seq,
    tcp_ts,
    tcp_opt,
    ip_ecn,
    ip_tos,
    ip_ttl,
    ip_id_df1_inc,
    ip_id_df1_fixed,
    ip_id_df0_inc,
    ip_id_df0_fixed,
    ip_id_df1_inc_fixed,
    ip_id_df1_fixed_inc,
    large_max,
    large_rem,
    single,
    capacity,
);

cases!(ip6ip6, Ip6ip6:
    data_same,
    data_lrg_sml,
    data_lrg_1byte,
    data_sml_lrg,
    data_burst,
    ack,
    flags_psh,
    flags_syn,
    flags_rst,
    flags_urg,
    flags_cwr,
    tcp_csum,
    tcp_seq,
    tcp_ts,
    tcp_opt,
    ip_ecn,
    ip_tos,
    large_max,
    large_rem,
    single,
    capacity,
);

cases!(gre, Gre:
    data_same,
    data_lrg_sml,
    data_lrg_1byte,
    data_sml_lrg,
    data_burst,
    ack,
    flags_psh,
    flags_syn,
    flags_rst,
    flags_urg,
    flags_cwr,
    tcp_csum,
    tcp_seq,
    tcp_ts,
    tcp_opt,
    ip_ecn,
    ip_tos,
    ip_ttl,
    ip_id_df1_inc,
    ip_id_df1_fixed,
    ip_id_df0_inc,
    ip_id_df0_fixed,
    ip_id_df1_inc_fixed,
    ip_id_df1_fixed_inc,
    large_max,
    large_rem,
    single,
    capacity,
);

cases!(gre_key, GreKey:
    data_same,
    data_lrg_sml,
    data_lrg_1byte,
    data_sml_lrg,
    data_burst,
    ack,
    flags_psh,
    flags_syn,
    flags_rst,
    flags_urg,
    flags_cwr,
    tcp_csum,
    tcp_seq,
    tcp_ts,
    tcp_opt,
    ip_ecn,
    ip_tos,
    ip_ttl,
    ip_id_df1_inc,
    ip_id_df1_fixed,
    ip_id_df0_inc,
    ip_id_df0_fixed,
    ip_id_df1_inc_fixed,
    ip_id_df1_fixed_inc,
    large_max,
    large_rem,
    single,
    capacity,
);

// GRE with a checksum, and with a checksum and a key: `gre_gro_receive`
// compares the word after the base header as the key, which is the
// checksum when the checksum flag is set (docs/engine.md, "Tunnels").
cases!(gre_csum, GreCsum:
    data_same,
    data_lrg_sml,
    data_lrg_1byte,
    data_sml_lrg,
    data_burst,
    ack,
    flags_psh,
    flags_syn,
    flags_rst,
    flags_urg,
    flags_cwr,
    tcp_csum,
    tcp_seq,
    tcp_ts,
    tcp_opt,
    ip_ecn,
    ip_tos,
    ip_ttl,
    ip_id_df1_inc,
    ip_id_df1_fixed,
    ip_id_df0_inc,
    ip_id_df0_fixed,
    ip_id_df1_inc_fixed,
    ip_id_df1_fixed_inc,
    large_max,
    large_rem,
    single,
    capacity,
);

cases!(gre_csum_key, GreCsumKey:
    data_same,
    data_lrg_sml,
    data_lrg_1byte,
    data_sml_lrg,
    data_burst,
    ack,
    flags_psh,
    flags_syn,
    flags_rst,
    flags_urg,
    flags_cwr,
    tcp_csum,
    tcp_seq,
    tcp_ts,
    tcp_opt,
    ip_ecn,
    ip_tos,
    ip_ttl,
    ip_id_df1_inc,
    ip_id_df1_fixed,
    ip_id_df0_inc,
    ip_id_df0_fixed,
    ip_id_df1_inc_fixed,
    ip_id_df1_fixed_inc,
    large_max,
    large_rem,
    single,
    capacity,
);
