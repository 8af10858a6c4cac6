//! The target of a run: a parsed `http://` or `https://` URL and the addresses it resolves to.

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// A parsed URL. Only what a load generator needs: scheme, host, port, path and query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub scheme: Scheme,
    /// The host as written, without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`; the fragment is dropped like curl does.
    pub path_and_query: String,
    /// Addresses someone already resolved and checked (see [`Target::pinned_to`]); empty when
    /// the host is to be resolved at the start of the run.
    pinned: Vec<SocketAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("invalid URL '{url}': {why}")]
    Invalid { url: String, why: &'static str },
    #[error("unsupported scheme '{scheme}' in '{url}': use http:// or https://")]
    Scheme { url: String, scheme: String },
    #[error("cannot resolve host '{host}': {why}")]
    Resolve { host: String, why: String },
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, TargetError> {
        let invalid = |why| TargetError::Invalid { url: url.to_string(), why };
        let (scheme, rest) = url.split_once("://").ok_or(invalid("no scheme (http:// or https://)"))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => {
                return Err(TargetError::Scheme { url: url.to_string(), scheme: scheme.to_string() });
            }
        };
        let rest = rest.split('#').next().unwrap_or("");
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        let path_and_query = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        if path_and_query.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(invalid("the path has spaces or control characters"));
        }
        if authority.contains('@') {
            return Err(invalid("user information in URLs is not supported; use -H 'Authorization: ...'"));
        }
        let default_port = match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or(invalid("unclosed '[' in host"))?;
            host.parse::<std::net::Ipv6Addr>().map_err(|_| invalid("bad IPv6 address"))?;
            let port = match after {
                "" => default_port,
                p => parse_port(p.strip_prefix(':').ok_or(invalid("junk after IPv6 address"))?)
                    .ok_or(invalid("bad port"))?,
            };
            (host.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), parse_port(p).ok_or(invalid("bad port"))?),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() {
            return Err(invalid("no host"));
        }
        if host.chars().any(|c| !(c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == ':')) {
            return Err(invalid("bad character in host"));
        }
        Ok(Target { scheme, host, port, path_and_query, pinned: Vec::new() })
    }

    /// This target, connected only at `addrs`: the run never resolves the host again, while the
    /// Host header and TLS server name still carry the name. A worker that checked where a name
    /// points pins what it checked, so that a name answering differently the second time (DNS
    /// rebinding) cannot move the load elsewhere. An empty `addrs` pins nothing.
    pub fn pinned_to(mut self, addrs: Vec<SocketAddr>) -> Target {
        self.pinned = addrs;
        self
    }

    /// `host[:port]` as the Host header wants it: the port only when not the scheme's default.
    pub fn authority(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        let default = match self.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        };
        if self.port == default { host } else { format!("{host}:{}", self.port) }
    }

    pub fn is_tls(&self) -> bool {
        self.scheme == Scheme::Https
    }

    /// The URL of `path` on this origin, for what reads requests as URLs (a cookie jar, a
    /// redirect's location); a templated path is taken by its text before its first `{{`, what
    /// is fixed of it. None if that is no URL's path.
    pub(crate) fn url_of(&self, path: &str) -> Option<url::Url> {
        let scheme = if self.is_tls() { "https" } else { "http" };
        let fixed = path.split("{{").next().unwrap_or("/");
        url::Url::parse(&format!("{scheme}://{}{fixed}", self.authority())).ok()
    }

    /// Resolves the host, once, before the run: the engine connects to the first address.
    /// A pinned target answers with its pinned addresses and asks no resolver.
    pub fn resolve(&self) -> Result<Vec<SocketAddr>, TargetError> {
        if !self.pinned.is_empty() {
            return Ok(self.pinned.clone());
        }
        if let Ok(ip) = self.host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, self.port)]);
        }
        let err = |why: String| TargetError::Resolve { host: self.host.clone(), why };
        let addrs: Vec<SocketAddr> =
            (self.host.as_str(), self.port).to_socket_addrs().map_err(|e| err(e.to_string()))?.collect();
        if addrs.is_empty() {
            return Err(err("no addresses".to_string()));
        }
        Ok(addrs)
    }
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    p.parse::<u16>().ok().filter(|&p| p != 0)
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        write!(f, "{scheme}://{}{}", self.authority(), self.path_and_query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_host_port_path_and_query() {
        let t = Target::parse("http://127.0.0.1:8080/x?y=1#frag").unwrap();
        assert_eq!(t.scheme, Scheme::Http);
        assert_eq!(t.host, "127.0.0.1");
        assert_eq!(t.port, 8080);
        assert_eq!(t.path_and_query, "/x?y=1");
        assert_eq!(t.to_string(), "http://127.0.0.1:8080/x?y=1");
    }

    #[test]
    fn defaults_port_and_path_by_scheme() {
        let t = Target::parse("https://example.com").unwrap();
        assert_eq!((t.port, t.path_and_query.as_str()), (443, "/"));
        assert_eq!(t.authority(), "example.com");
        let q = Target::parse("http://h?a=b").unwrap();
        assert_eq!(q.path_and_query, "/?a=b");
    }

    #[test]
    fn parses_ipv6_literals() {
        let t = Target::parse("http://[::1]:9000/").unwrap();
        assert_eq!(t.host, "::1");
        assert_eq!(t.authority(), "[::1]:9000");
        assert_eq!(t.resolve().unwrap()[0], "[::1]:9000".parse().unwrap());
    }

    #[test]
    fn a_pinned_target_resolves_to_its_pins_without_asking_a_resolver() {
        // `.invalid` never resolves (RFC 6761), so an answer can only come from the pins.
        let t = Target::parse("https://rebind.invalid:8443/x").unwrap();
        assert!(matches!(t.resolve(), Err(TargetError::Resolve { .. })));
        let pins: Vec<SocketAddr> = vec!["127.0.0.7:8443".parse().unwrap(), "[::1]:8443".parse().unwrap()];
        let pinned = t.pinned_to(pins.clone());
        assert_eq!(pinned.resolve().unwrap(), pins);
        assert_eq!((pinned.host.as_str(), pinned.authority()), ("rebind.invalid", "rebind.invalid:8443".into()));
        assert_eq!(pinned.to_string(), "https://rebind.invalid:8443/x");
    }

    #[test]
    fn rejects_bad_urls_with_a_reason() {
        for bad in [
            "127.0.0.1:80",
            "http://",
            "http://h:99999/",
            "http://h:0/",
            "http://h:x/",
            "http://[::1/",
            "http://a b/",
            "http://u:p@h/",
            "http://h/a b",
        ] {
            assert!(matches!(Target::parse(bad), Err(TargetError::Invalid { .. })), "{bad}");
        }
        assert!(matches!(Target::parse("ftp://h/"), Err(TargetError::Scheme { .. })));
    }
}
