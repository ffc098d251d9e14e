//! Who may connect over TCP, by address (`--allow`, `--deny`): lists of networks in CIDR
//! notation (`10.0.0.0/8`, `192.168.1.7`, `fd00::/8`, `::1`). A connection from an address in
//! a denied network, or, where networks are allowed, from one in none of them, is closed as it
//! is accepted, before the server sends a byte. IPv4 addresses a dual-stack socket reports as
//! IPv6 (`::ffff:a.b.c.d`) are matched as IPv4.

use std::net::IpAddr;

use anyhow::Context;

/// A network: an address and how many of its leading bits count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Network {
    address: IpAddr,
    prefix: u8,
}

impl Network {
    /// `text` as `ADDRESS` or `ADDRESS/PREFIX`.
    fn parse(text: &str) -> Option<Network> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let address: IpAddr = address.trim().parse().ok()?;
        let address = address.to_canonical();
        let bits = if address.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.trim().parse::<u8>().ok().filter(|&p| p <= bits)?,
            None => bits,
        };
        Some(Network { address, prefix })
    }

    fn contains(&self, address: IpAddr) -> bool {
        let mask = |bits: u32, width: u32| -> u128 {
            match bits {
                0 => 0,
                _ => (u128::MAX << (width - bits)) & (u128::MAX >> (128 - width)),
            }
        };
        match (self.address, address.to_canonical()) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let m = mask(self.prefix as u32, 32);
                u32::from(net) as u128 & m == u32::from(ip) as u128 & m
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let m = mask(self.prefix as u32, 128);
                u128::from(net) & m == u128::from(ip) & m
            }
            _ => false,
        }
    }
}

/// The networks allowed (none given: every address) and denied.
#[derive(Clone, Debug, Default)]
pub(super) struct Addresses {
    allow: Option<Vec<Network>>,
    deny: Vec<Network>,
}

/// The networks of `list` (comma-separated), an error naming `option` and the bad one.
fn networks(option: &str, list: &str) -> anyhow::Result<Vec<Network>> {
    list.split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|t| {
            Network::parse(t).with_context(|| {
                format!("{option} {t}: not an address or network (as 10.0.0.0/8, ::1)")
            })
        })
        .collect()
}

impl Addresses {
    pub(super) fn new(allow: Option<&str>, deny: Option<&str>) -> anyhow::Result<Addresses> {
        Ok(Addresses {
            allow: allow.map(|list| networks("--allow", list)).transpose()?,
            deny: deny.map(|list| networks("--deny", list)).transpose()?.unwrap_or_default(),
        })
    }

    /// Whether any list was given.
    pub(super) fn is_set(&self) -> bool {
        self.allow.is_some() || !self.deny.is_empty()
    }

    /// Whether a client at `address` may connect.
    pub(super) fn admit(&self, address: IpAddr) -> bool {
        let allowed =
            self.allow.as_ref().is_none_or(|nets| nets.iter().any(|n| n.contains(address)));
        allowed && !self.deny.iter().any(|n| n.contains(address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_match_their_addresses_and_deny_wins() {
        let rules =
            Addresses::new(Some("10.0.0.0/8, 192.168.1.7, fd00::/8"), Some("10.9.0.0/16")).unwrap();
        let admit = |text: &str| rules.admit(text.parse().unwrap());
        assert!(admit("10.1.2.3") && admit("192.168.1.7") && admit("fd12::1"));
        assert!(!admit("10.9.1.1"), "denied inside an allowed network");
        assert!(!admit("192.168.1.8") && !admit("127.0.0.1") && !admit("::1"));
        assert!(admit("::ffff:10.1.2.3"), "an IPv4 address seen over IPv6");
        let everyone_but = Addresses::new(None, Some("127.0.0.0/8")).unwrap();
        assert!(!everyone_but.admit("127.0.0.1".parse().unwrap()));
        assert!(everyone_but.admit("10.0.0.1".parse().unwrap()));
        let any = Addresses::new(Some("0.0.0.0/0"), None).unwrap();
        assert!(any.admit("8.8.8.8".parse().unwrap()) && !any.admit("::1".parse().unwrap()));
        for bad in ["10.0.0.0/33", "nonsense", "10.0.0/8", "::1/129"] {
            let error = Addresses::new(Some(bad), None).unwrap_err().to_string();
            assert!(error.contains("--allow") && error.contains(bad), "{error}");
        }
    }
}
