//! A run has one origin (scheme, host, port): the command line's URL's, a scenario file's
//! `origin`, or else the first that the file names. Every target's URL is checked against it and
//! reduced to its path.

use std::fmt;

use volley_engine::{Scheme, Target};

use super::error::{Problem, shown};

/// The run's origin, once known, and where it came from.
pub(crate) struct OneOrigin {
    origin: Option<Target>,
    /// Who gave the origin before any path was read; none when the file's first URL gives it.
    given: Option<Given>,
}

/// Where an origin known before the file's paths came from: what a path is taken against, and
/// what a message about a URL of another origin names.
#[derive(Clone, Copy)]
enum Given {
    CommandLine,
    /// A scenario file's `origin`.
    File,
}

impl OneOrigin {
    /// The origin of `url` (the command line's), or none yet: the file's first URL gives it.
    pub(crate) fn new(url: Option<&Target>) -> OneOrigin {
        OneOrigin { origin: url.map(root), given: url.map(|_| Given::CommandLine) }
    }

    /// The origin a scenario file gives with its `origin` key (checked by its reader against
    /// the command line's URL, if any): its paths are taken against it.
    pub(crate) fn of_file(origin: &Target) -> OneOrigin {
        OneOrigin { origin: Some(root(origin)), given: Some(Given::File) }
    }

    /// The path and query a target's URL goes to, once its origin is found to be the run's:
    /// an absolute URL's, or a path (`/x?y`) taken as it is, which needs the command line's
    /// origin.
    pub(crate) fn path_of(&mut self, url: &str) -> Result<String, Problem> {
        let absolute = if url.starts_with('/') {
            let Some(origin) = self.origin.as_ref().filter(|_| self.given.is_some()) else {
                return Err(Problem::PathWithoutOrigin { path: shown(url) });
            };
            // Parsed whole, so that a path is held to the rules of a URL's.
            Target::parse(&format!("{}{url}", Shown(origin).prefix()))
        } else {
            Target::parse(url)
        };
        let target = absolute.map_err(|e| Problem::Url(shown(&e.to_string())))?;
        match &self.origin {
            None => self.origin = Some(root(&target)),
            Some(origin) if same_origin(origin, &target) => {}
            Some(origin) => {
                let (found, origin) = (Shown(&target).to_string(), Shown(origin).to_string());
                return Err(match self.given {
                    Some(Given::CommandLine) => Problem::NotTheUrlsOrigin { found, url: origin },
                    Some(Given::File) => Problem::NotTheFilesOrigin { found, origin },
                    None => Problem::SecondOrigin { found, first: origin },
                });
            }
        }
        Ok(target.path_and_query)
    }

    /// The origin, as a target whose path is `/`; none if no URL was seen.
    pub(crate) fn into_target(self) -> Option<Target> {
        self.origin
    }
}

/// `target` with the path `/`: the origin alone.
fn root(target: &Target) -> Target {
    let mut origin = target.clone();
    origin.path_and_query = "/".to_string();
    origin
}

/// Host names compare without case, as DNS does.
pub(crate) fn same_origin(a: &Target, b: &Target) -> bool {
    a.scheme == b.scheme && a.host.eq_ignore_ascii_case(&b.host) && a.port == b.port
}

/// An origin as messages show it: `http://a:80`, the port always written, since two origins
/// that differ only by a default port are easier to tell apart with it.
pub(crate) struct Shown<'a>(pub(crate) &'a Target);

impl Shown<'_> {
    /// `http://host:port`, before a path.
    fn prefix(&self) -> String {
        let scheme = match self.0.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        let host = if self.0.host.contains(':') { format!("[{}]", self.0.host) } else { self.0.host.clone() };
        format!("{scheme}://{host}:{}", self.0.port)
    }
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.prefix())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Target {
        Target::parse(text).expect("a URL")
    }

    #[test]
    fn the_first_url_of_the_file_is_the_origin_when_the_command_line_has_none() {
        let mut one = OneOrigin::new(None);
        assert_eq!(one.path_of("http://a:8080/x?y=1").unwrap(), "/x?y=1");
        assert_eq!(one.path_of("http://A:8080").unwrap(), "/", "host names compare without case");
        let e = one.path_of("http://a:8081/z").unwrap_err().to_string();
        assert_eq!(e, "http://a:8081 is a second origin; a run has one (http://a:8080)");
        let e = one.path_of("https://a:8080/z").unwrap_err().to_string();
        assert_eq!(e, "https://a:8080 is a second origin; a run has one (http://a:8080)");
        assert_eq!(one.into_target().unwrap().to_string(), "http://a:8080/");
    }

    #[test]
    fn a_path_takes_the_command_lines_origin_and_needs_one() {
        let mut none = OneOrigin::new(None);
        let e = none.path_of("/x").unwrap_err().to_string();
        assert_eq!(e, "/x is a path, and there is no URL on the command line to give its origin");
        // Not even from an absolute URL before it: which origin a path means would depend on
        // the order of the file.
        none.path_of("http://a/").unwrap();
        assert!(matches!(none.path_of("/x"), Err(Problem::PathWithoutOrigin { .. })));

        let mut given = OneOrigin::new(Some(&url("http://[::1]:9000/")));
        assert_eq!(given.path_of("/x?q#fragment").unwrap(), "/x?q");
        assert_eq!(given.path_of("http://[::1]:9000/y").unwrap(), "/y");
        let e = given.path_of("http://127.0.0.1:9000/").unwrap_err().to_string();
        assert_eq!(
            e,
            "http://127.0.0.1:9000 is not the origin of the command line's URL (http://[::1]:9000); a run has one"
        );
        assert!(matches!(given.path_of("/a b"), Err(Problem::Url(_))), "a path keeps a URL's rules");
    }

    #[test]
    fn a_files_own_origin_takes_paths_and_is_named_when_a_url_differs() {
        let mut file = OneOrigin::of_file(&url("http://a:8080/ignored"));
        assert_eq!(file.path_of("/x?y").unwrap(), "/x?y");
        assert_eq!(file.path_of("http://A:8080/z").unwrap(), "/z");
        let e = file.path_of("http://a:8081/z").unwrap_err().to_string();
        assert_eq!(e, "http://a:8081 is not the file's origin (http://a:8080); a run has one");
        assert_eq!(file.into_target().unwrap().to_string(), "http://a:8080/");
    }

    #[test]
    fn what_is_neither_a_url_nor_a_path_is_an_invalid_url() {
        let mut one = OneOrigin::new(None);
        for bad in ["example.com/x", "ftp://a/", "http://a:99999/", "*"] {
            assert!(matches!(one.path_of(bad), Err(Problem::Url(_))), "{bad}");
        }
    }
}
