//! The HTTP versions a report covers: one for a run, several for a merge of saved runs that
//! spoke different ones. A type, so that the report asks "was this HTTP/3?" of a value rather
//! than of a string.

use std::fmt;

use volley_engine::Protocol;

/// An HTTP version, as a report names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HttpVersion {
    Http1,
    Http2,
    Http3,
}

impl HttpVersion {
    const ALL: [HttpVersion; 3] = [HttpVersion::Http1, HttpVersion::Http2, HttpVersion::Http3];

    /// The name a report prints and a saved report holds.
    pub(crate) fn label(self) -> &'static str {
        match self {
            HttpVersion::Http1 => "HTTP/1.1",
            HttpVersion::Http2 => "HTTP/2",
            HttpVersion::Http3 => "HTTP/3",
        }
    }

    pub(crate) fn of(protocol: Protocol) -> HttpVersion {
        match protocol {
            Protocol::Http1 => HttpVersion::Http1,
            Protocol::Http2 { .. } => HttpVersion::Http2,
            Protocol::Http3 { .. } => HttpVersion::Http3,
        }
    }

    fn from_label(label: &str) -> Option<HttpVersion> {
        HttpVersion::ALL.into_iter().find(|v| v.label() == label)
    }
}

/// The versions a report covers, in the order first met; never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Protocols(Vec<HttpVersion>);

impl Protocols {
    pub(crate) fn one(version: HttpVersion) -> Protocols {
        Protocols(vec![version])
    }

    /// A saved report's `protocol`: one name, or a merged report's names joined by ", ".
    /// None when a name is not one volley writes.
    pub(crate) fn parse(text: &str) -> Option<Protocols> {
        let versions: Option<Vec<HttpVersion>> = text.split(", ").map(HttpVersion::from_label).collect();
        versions.filter(|v| !v.is_empty()).map(Protocols)
    }

    /// Adds the versions of `other` not already here.
    pub(crate) fn add(&mut self, other: &Protocols) {
        for v in &other.0 {
            if !self.0.contains(v) {
                self.0.push(*v);
            }
        }
    }

    /// Every run the report covers spoke `version`.
    pub(crate) fn is_only(&self, version: HttpVersion) -> bool {
        self.0.iter().all(|v| *v == version)
    }
}

impl fmt::Display for Protocols {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(v.label())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_merged_reports_names_read_back_as_the_versions_they_name() {
        let mut merged = Protocols::one(HttpVersion::Http2);
        merged.add(&Protocols::one(HttpVersion::Http3));
        merged.add(&Protocols::one(HttpVersion::Http2));
        assert_eq!(merged.to_string(), "HTTP/2, HTTP/3");
        assert_eq!(Protocols::parse(&merged.to_string()), Some(merged.clone()));
        assert!(!merged.is_only(HttpVersion::Http3));
        assert!(Protocols::parse("HTTP/3").is_some_and(|p| p.is_only(HttpVersion::Http3)));
        for bad in ["", "HTTP/4", "HTTP/2,HTTP/3", "http/1.1", "HTTP/2, "] {
            assert_eq!(Protocols::parse(bad), None, "{bad:?}");
        }
    }
}
