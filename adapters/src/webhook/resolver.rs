//! The HTTP client's resolver: it looks a webhook's host up and returns only the
//! addresses [`AddressPolicy`] allows, so the client connects to an address that
//! was checked (no second lookup can answer differently). A host with no allowed
//! address fails with [`RefusedAddress`], which the caller finds in the error's
//! sources.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::address::{AddressClass, AddressPolicy, classify};

/// A lookup of a host's addresses: the system's, or a test's stub.
pub trait Lookup: Send + Sync {
    /// The addresses of `host`.
    fn lookup(&self, host: String)
    -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;
}

/// The system resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(
        &self,
        host: String,
    ) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .map(|addr| addr.ip())
                .collect())
        })
    }
}

/// Every address of a host was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedAddress {
    /// The host, as in the URL.
    pub host: String,
    /// The first address refused, and what it is.
    pub address: IpAddr,
    /// What it is (`private`, `loopback`, ...).
    pub what: &'static str,
}

impl fmt::Display for RefusedAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} resolves to no allowed address ({} is {})",
            self.host, self.address, self.what
        )
    }
}

impl std::error::Error for RefusedAddress {}

/// What `address` is, in words.
pub fn describe(address: IpAddr) -> &'static str {
    match classify(address) {
        AddressClass::Public => "public",
        AddressClass::Loopback => "loopback",
        AddressClass::Special(what) => what,
    }
}

/// The checking resolver (see the module documentation).
#[derive(Clone)]
pub struct CheckedResolver {
    policy: AddressPolicy,
    lookup: Arc<dyn Lookup>,
}

impl CheckedResolver {
    /// Looks hosts up with `lookup` and keeps what `policy` allows.
    pub fn new(policy: AddressPolicy, lookup: Arc<dyn Lookup>) -> Self {
        CheckedResolver { policy, lookup }
    }

    /// The allowed addresses of `host`, or why there are none.
    pub async fn allowed(
        &self,
        host: &str,
    ) -> Result<Vec<IpAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let found = self.lookup.lookup(host.to_owned()).await?;
        let allowed: Vec<IpAddr> = found
            .iter()
            .copied()
            .filter(|ip| self.policy.allows(*ip))
            .collect();
        match (allowed.is_empty(), found.first()) {
            (false, _) => Ok(allowed),
            (true, Some(first)) => Err(Box::new(RefusedAddress {
                host: host.to_owned(),
                address: *first,
                what: describe(*first),
            })),
            (true, None) => Err(Box::new(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{host} has no address"),
            ))),
        }
    }
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let resolver = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let allowed = resolver.allowed(&host).await?;
            let addrs: Addrs = Box::new(allowed.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A lookup from a fixed table: no test asks a real DNS server.
    pub(crate) struct StubLookup(pub HashMap<String, Vec<IpAddr>>);

    impl StubLookup {
        pub(crate) fn of(entries: &[(&str, &[&str])]) -> Arc<StubLookup> {
            Arc::new(StubLookup(
                entries
                    .iter()
                    .map(|(host, ips)| {
                        (
                            (*host).to_owned(),
                            ips.iter().map(|ip| ip.parse().unwrap()).collect(),
                        )
                    })
                    .collect(),
            ))
        }
    }

    impl Lookup for StubLookup {
        fn lookup(
            &self,
            host: String,
        ) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
            let found = self.0.get(&host).cloned().unwrap_or_default();
            Box::pin(async move { Ok(found) })
        }
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|ip| ip.parse().unwrap()).collect()
    }

    #[tokio::test]
    async fn only_allowed_addresses_are_returned_and_a_host_with_none_is_refused() {
        let lookup = StubLookup::of(&[
            ("public.example", &["93.184.216.34"]),
            ("mixed.example", &["10.0.0.1", "93.184.216.34", "::1"]),
            ("metadata.example", &["169.254.169.254"]),
            ("private.example", &["10.1.2.3", "192.168.0.1"]),
            (
                "loopback.example",
                &["127.0.0.1", "::1", "::ffff:127.0.0.1"],
            ),
            ("mapped.example", &["::ffff:10.0.0.1"]),
        ]);
        let jwt = CheckedResolver::new(AddressPolicy::PublicOnly, lookup.clone());
        let dev = CheckedResolver::new(AddressPolicy::PublicAndLoopback, lookup);

        assert_eq!(
            jwt.allowed("public.example").await.unwrap(),
            ips(&["93.184.216.34"])
        );
        assert_eq!(
            jwt.allowed("mixed.example").await.unwrap(),
            ips(&["93.184.216.34"])
        );
        assert_eq!(
            dev.allowed("mixed.example").await.unwrap(),
            ips(&["93.184.216.34", "::1"])
        );
        for (host, first, what) in [
            ("metadata.example", "169.254.169.254", "link-local"),
            ("private.example", "10.1.2.3", "private"),
            ("loopback.example", "127.0.0.1", "loopback"),
            ("mapped.example", "::ffff:10.0.0.1", "private"),
        ] {
            let error = jwt.allowed(host).await.unwrap_err();
            let refused = error.downcast_ref::<RefusedAddress>().unwrap();
            assert_eq!(refused.address, first.parse::<IpAddr>().unwrap(), "{host}");
            assert_eq!(refused.what, what, "{host}");
        }
        assert_eq!(
            dev.allowed("loopback.example").await.unwrap(),
            ips(&["127.0.0.1", "::1", "::ffff:127.0.0.1"])
        );
        assert!(dev.allowed("metadata.example").await.is_err());
        let unknown = jwt.allowed("nowhere.example").await.unwrap_err();
        assert!(unknown.downcast_ref::<RefusedAddress>().is_none());
    }
}
