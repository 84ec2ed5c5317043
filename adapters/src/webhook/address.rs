//! Which addresses a webhook may reach: a pure function over [`IpAddr`], applied to
//! every address a webhook's host resolves to (by the resolver the HTTP client
//! uses, so the connection goes to an address that was checked) and to an IP
//! literal in the URL before any request.
//!
//! Only public unicast addresses are allowed. Refused: private (10/8, 172.16/12,
//! 192.168/16), loopback (127/8, `::1`), link-local (169.254/16 — the instance
//! metadata service at 169.254.169.254 among them —, `fe80::/10`), unique-local
//! (`fc00::/7`), site-local (`fec0::/10`), unspecified and "this network" (0/8,
//! `::`), multicast, broadcast, documentation (192.0.2/24, 198.51.100/24,
//! 203.0.113/24, `2001:db8::/32`, `3fff::/20`), CGNAT (100.64/10), benchmarking
//! (198.18/15, `2001:2::/48`), the IETF's protocol assignments (192.0.0/24,
//! `2001::/23`), the 6to4 relay (192.88.99/24) and 6to4 (`2002::/16`), reserved
//! (240/4; every IPv6 address outside `2000::/3`), discard-only (`100::/64`) and
//! local-use NAT64 (`64:ff9b:1::/48`). An IPv4 address written in IPv6 — mapped
//! (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`) or NAT64 (`64:ff9b::a.b.c.d`) — is
//! judged as the IPv4 address it carries.
//!
//! `AUTH_MODE=dev` (local runs) also allows loopback, and only loopback: the
//! example tool server of the local stack listens on 127.0.0.1.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Which addresses are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressPolicy {
    /// Public addresses only (deployed: `AUTH_MODE=jwt`).
    PublicOnly,
    /// Public addresses and loopback (`AUTH_MODE=dev`).
    PublicAndLoopback,
}

/// What an address is, for the check and for the message of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// A public unicast address.
    Public,
    /// Loopback (127/8, `::1`, and their IPv6 forms).
    Loopback,
    /// Anything else, with what it is.
    Special(&'static str),
}

impl AddressPolicy {
    /// Whether `ip` may be connected to.
    pub fn allows(self, ip: IpAddr) -> bool {
        match classify(ip) {
            AddressClass::Public => true,
            AddressClass::Loopback => self == AddressPolicy::PublicAndLoopback,
            AddressClass::Special(_) => false,
        }
    }
}

/// What `ip` is (see the module documentation).
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// Whether `ip` is in `prefix/bits`.
fn in_v4(ip: Ipv4Addr, prefix: [u8; 4], bits: u32) -> bool {
    let mask = u32::MAX.checked_shl(32 - bits).unwrap_or(0);
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(prefix)) & mask
}

/// Whether `ip` is in `prefix/bits`.
fn in_v6(ip: Ipv6Addr, prefix: [u16; 8], bits: u32) -> bool {
    let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(prefix)) & mask
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    const SPECIAL: &[([u8; 4], u32, &str)] = &[
        ([0, 0, 0, 0], 8, "unspecified (\"this network\")"),
        ([10, 0, 0, 0], 8, "private"),
        ([100, 64, 0, 0], 10, "shared (CGNAT)"),
        ([169, 254, 0, 0], 16, "link-local"),
        ([172, 16, 0, 0], 12, "private"),
        ([192, 0, 0, 0], 24, "IETF protocol assignments"),
        ([192, 0, 2, 0], 24, "documentation"),
        ([192, 88, 99, 0], 24, "6to4 relay"),
        ([192, 168, 0, 0], 16, "private"),
        ([198, 18, 0, 0], 15, "benchmarking"),
        ([198, 51, 100, 0], 24, "documentation"),
        ([203, 0, 113, 0], 24, "documentation"),
        ([224, 0, 0, 0], 4, "multicast"),
        ([255, 255, 255, 255], 32, "broadcast"),
        ([240, 0, 0, 0], 4, "reserved"),
    ];
    if in_v4(ip, [127, 0, 0, 0], 8) {
        return AddressClass::Loopback;
    }
    SPECIAL
        .iter()
        .find(|(prefix, bits, _)| in_v4(ip, *prefix, *bits))
        .map_or(AddressClass::Public, |(_, _, what)| {
            AddressClass::Special(what)
        })
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    if ip.is_unspecified() {
        return AddressClass::Special("unspecified");
    }
    if ip.is_loopback() {
        return AddressClass::Loopback;
    }
    // IPv4 in IPv6 clothing: mapped, compatible (deprecated, still routed by some
    // stacks) and the well-known NAT64 prefix are judged by the address they carry.
    let low = Ipv4Addr::from((u128::from(ip) & 0xffff_ffff) as u32);
    if in_v6(ip, [0, 0, 0, 0, 0, 0xffff, 0, 0], 96)
        || in_v6(ip, [0; 8], 96)
        || in_v6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96)
    {
        return classify_v4(low);
    }
    const SPECIAL: &[([u16; 8], u32, &str)] = &[
        ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, "local-use NAT64"),
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only"),
        ([0x2001, 0x2, 0, 0, 0, 0, 0, 0], 48, "benchmarking"),
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "documentation"),
        (
            [0x2001, 0, 0, 0, 0, 0, 0, 0],
            23,
            "IETF protocol assignments",
        ),
        ([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4"),
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation"),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique-local"),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local"),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local"),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast"),
    ];
    if let Some((_, _, what)) = SPECIAL
        .iter()
        .find(|(prefix, bits, _)| in_v6(ip, *prefix, *bits))
    {
        return AddressClass::Special(what);
    }
    // Global unicast is 2000::/3; everything else is reserved.
    if in_v6(ip, [0x2000, 0, 0, 0, 0, 0, 0, 0], 3) {
        AddressClass::Public
    } else {
        AddressClass::Special("reserved")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn public_addresses_are_allowed_in_both_modes() {
        for text in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:80b::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(classify(ip(text)), AddressClass::Public, "{text}");
            assert!(AddressPolicy::PublicOnly.allows(ip(text)), "{text}");
            assert!(AddressPolicy::PublicAndLoopback.allows(ip(text)), "{text}");
        }
    }

    #[test]
    fn loopback_and_its_ipv6_forms_are_refused_in_jwt_mode_and_allowed_in_dev() {
        for text in [
            "127.0.0.1",
            "127.255.255.254",
            "::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert_eq!(classify(ip(text)), AddressClass::Loopback, "{text}");
            assert!(!AddressPolicy::PublicOnly.allows(ip(text)), "{text}");
            assert!(AddressPolicy::PublicAndLoopback.allows(ip(text)), "{text}");
        }
    }

    #[test]
    fn special_addresses_are_refused_in_both_modes() {
        for (text, what) in [
            ("10.0.0.1", "private"),
            ("10.255.255.255", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("169.254.0.1", "link-local"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.127.255.255", "shared (CGNAT)"),
            ("0.0.0.0", "unspecified (\"this network\")"),
            ("0.1.2.3", "unspecified (\"this network\")"),
            ("192.0.0.8", "IETF protocol assignments"),
            ("192.0.2.10", "documentation"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("192.88.99.1", "6to4 relay"),
            ("198.18.0.1", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.255", "broadcast"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fc00::1", "unique-local"),
            ("fd12:3456::1", "unique-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("2001:2::1", "benchmarking"),
            ("2001::1", "IETF protocol assignments"),
            ("2002:7f00:1::1", "6to4"),
            ("100::1", "discard-only"),
            ("64:ff9b:1::a00:1", "local-use NAT64"),
            ("4000::1", "reserved"),
            ("::1:0:0:1", "reserved"),
            // IPv4 in IPv6 clothing carries the IPv4 address's class.
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::ffff:192.168.0.1", "private"),
            ("::10.0.0.1", "private"),
            ("::169.254.169.254", "link-local"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("64:ff9b::a00:1", "private"),
            ("::ffff:0.0.0.0", "unspecified (\"this network\")"),
        ] {
            assert_eq!(classify(ip(text)), AddressClass::Special(what), "{text}");
            assert!(!AddressPolicy::PublicOnly.allows(ip(text)), "{text}");
            assert!(!AddressPolicy::PublicAndLoopback.allows(ip(text)), "{text}");
        }
    }

    #[test]
    fn every_address_of_10_0_0_0_slash_8_is_refused_at_its_edges() {
        for text in ["9.255.255.255", "11.0.0.0"] {
            assert_eq!(classify(ip(text)), AddressClass::Public, "{text}");
        }
        for last in [0u8, 1, 127, 255] {
            for second in [0u8, 1, 128, 255] {
                let addr = IpAddr::V4(Ipv4Addr::new(10, second, 0, last));
                assert!(!AddressPolicy::PublicOnly.allows(addr), "{addr}");
                assert!(!AddressPolicy::PublicAndLoopback.allows(addr), "{addr}");
            }
        }
    }
}
