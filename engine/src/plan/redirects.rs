//! Following redirects: a step that follows them gets hop requests of its own, appended after
//! the mix's, whose path is the `Location` its last answer gave (a template slot filled from
//! a variable no file can name), so that every protocol sends a hop the way it sends any
//! templated step: no request is built at run time.
//!
//! A hop is sent on its user's connection right after the redirect, as the step it follows
//! for: it shares the step's name (its responses and latency are counted there, and each
//! followed redirect is counted as one), its checks, extractors, think time and jar, all of
//! which judge only the final answer. As browsers, curl and Go's client do, a 301, 302 or 303
//! is followed with a GET without a body (a HEAD stays a HEAD), a 307 or 308 with the step's
//! own method and body (a GET or HEAD step's hops have no body).

use url::Url;

use super::{Mix, NamedRequest, RequestSpec, is_request_path};
use crate::target::Target;

/// The most redirects in a row a step may follow.
pub const MAX_REDIRECTS: u8 = 20;

/// How many redirects in a row a step follows unless its file says: as browsers and k6.
pub const DEFAULT_REDIRECTS: u8 = 10;

/// The variable a hop's path is filled from: a name no extractor may take.
pub(crate) const LOCATION_VAR: &str = "@location";
/// The field redirects follow.
pub(crate) const LOCATION: &[u8] = b"location";

/// A mix's hop requests, and for each of its requests (hops included) how it follows
/// redirects.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hops {
    /// Per hop, after the mix's own requests: the step it follows for, and what it sends.
    hops: Vec<(u32, NamedRequest)>,
    /// Per request, hops included: how it follows redirects; empty when none does.
    follows: Box<[Option<Follow>]>,
}

/// How a request follows redirects: at most `limit` in a row, by hop request `get` after a
/// 301, 302 or 303 and by `same` after a 307 or 308.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Follow {
    limit: u8,
    get: u32,
    same: u32,
}

impl Follow {
    /// The hop that follows a redirect answered with `status`; None for statuses that are not
    /// followed (300, 304, 305 and the like).
    fn hop_for(&self, status: u16) -> Option<u32> {
        match status {
            301..=303 => Some(self.get),
            307 | 308 => Some(self.same),
            _ => None,
        }
    }
}

impl Hops {
    /// The hops of `mix`'s steps that follow redirects (`NamedRequest::follow_redirects`).
    pub(crate) fn of(mix: &Mix) -> Hops {
        let own = mix.requests.len();
        let mut hops: Vec<(u32, NamedRequest)> = Vec::new();
        let mut follows: Vec<Option<Follow>> = vec![None; own];
        for (step, r) in mix.requests.iter().enumerate().filter(|(_, r)| r.follow_redirects > 0) {
            let get = (own + hops.len()) as u32;
            let keeps_method = r.spec.method.eq_ignore_ascii_case("GET") || r.spec.is_head();
            hops.push((step as u32, hop(r, true)));
            let same = if keeps_method {
                get
            } else {
                hops.push((step as u32, hop(r, false)));
                get + 1
            };
            follows[step] = Some(Follow { limit: r.follow_redirects, get, same });
        }
        if hops.is_empty() {
            return Hops::default();
        }
        for (step, _) in &hops {
            follows.push(follows[*step as usize]);
        }
        Hops { hops, follows: follows.into() }
    }

    /// Whether some step follows redirects.
    pub(crate) fn any(&self) -> bool {
        !self.hops.is_empty()
    }

    /// The hop requests, in order after the mix's own.
    pub(crate) fn requests(&self) -> impl Iterator<Item = &NamedRequest> {
        self.hops.iter().map(|(_, r)| r)
    }

    /// `table`, one entry per request of the mix, with an entry per hop: its step's. An empty
    /// table (nothing to look up) stays empty.
    pub(crate) fn extended<T: Clone>(&self, mut table: Vec<T>) -> Vec<T> {
        for (step, _) in &self.hops {
            if let Some(entry) = table.get(*step as usize).cloned() {
                table.push(entry);
            }
        }
        table
    }

    /// What the loop follows redirects by, on `origin`: `paths` are the mix's own requests'
    /// (hops are told theirs as they go), `var` the variable hops' paths are filled from. None
    /// when no step follows redirects.
    pub(crate) fn redirects(&self, origin: &Target, paths: &[&str], var: u16) -> Option<Redirects> {
        if !self.any() {
            return None;
        }
        let mut bases: Vec<Option<Url>> = paths.iter().map(|p| origin.url_of(p)).collect();
        bases.resize(self.follows.len(), None);
        Some(Redirects { follows: self.follows.clone(), bases: bases.into(), origin: origin.url_of("/")?, var })
    }
}

/// What the loop follows redirects by.
#[derive(Debug, Clone)]
pub(crate) struct Redirects {
    /// Per request, hops included: how it follows them; None: it does not.
    follows: Box<[Option<Follow>]>,
    /// Per request of the mix's own: the URL a relative location is read against (what is
    /// fixed of its path, as for a cookie jar).
    bases: Box<[Option<Url>]>,
    origin: Url,
    /// The variable a hop's path is filled from.
    pub var: u16,
}

impl Redirects {
    /// The hop that follows an answer to `request` with `status` and `location`, and the URL
    /// it goes to, if the request follows redirects, has followed fewer than its limit in a row
    /// (`hops`), and the location is on the run's origin. `current`: the URL the request went
    /// to, if it is a hop.
    pub(crate) fn next_hop(
        &self,
        request: u32,
        status: u16,
        location: &[u8],
        hops: u8,
        current: Option<&Url>,
    ) -> Option<(u32, Url)> {
        let follow = self.follows.get(request as usize).copied().flatten()?;
        let hop = follow.hop_for(status).filter(|_| hops < follow.limit)?;
        let base = current.or_else(|| self.bases.get(request as usize).and_then(Option::as_ref))?;
        Some((hop, resolve(location, base, &self.origin)?))
    }
}

/// What a hop of `step` sends: its method, headers and body, or (`bodiless`) a GET (a HEAD
/// stays one) without a body or the fields that describe one; its path is the location's.
fn hop(step: &NamedRequest, bodiless: bool) -> NamedRequest {
    let spec = if bodiless {
        let describes_body =
            |n: &str| n.eq_ignore_ascii_case("content-type") || n.eq_ignore_ascii_case("content-length");
        let headers = step.spec.headers.iter().filter(|(n, _)| !describes_body(n)).cloned().collect();
        RequestSpec::new(if step.spec.is_head() { "HEAD" } else { "GET" }, headers, Vec::new())
    } else {
        step.spec.clone()
    };
    NamedRequest { path_and_query: format!("{{{{{LOCATION_VAR}}}}}"), spec, templated: true, ..step.clone() }
}

/// Where a redirect's `location` points, read against `base` (the URL its request went to):
/// the URL, if it is on `origin` (scheme, host and port) and its path and query may go into a
/// request line. None otherwise: a run speaks to one origin, so a redirect elsewhere is not
/// followed.
pub(crate) fn resolve(location: &[u8], base: &Url, origin: &Url) -> Option<Url> {
    let text = std::str::from_utf8(location).ok()?.trim();
    let url = base.join(text).ok()?;
    let same_origin = url.scheme() == origin.scheme()
        && url.host_str() == origin.host_str()
        && url.port_or_known_default() == origin.port_or_known_default();
    (same_origin && is_request_path(path_and_query(&url))).then_some(url)
}

/// The path and query of `url`, as a request line carries them.
pub(crate) fn path_and_query(url: &Url) -> &str {
    &url[url::Position::BeforePath..url::Position::AfterQuery]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Order;

    fn step(method: &str, follow: u8) -> NamedRequest {
        NamedRequest {
            name: "login".into(),
            path_and_query: "/login".into(),
            spec: RequestSpec::new(
                method,
                vec![("content-type".into(), "application/json".into()), ("x-user".into(), "{{vu}}".into())],
                b"{}".to_vec(),
            ),
            templated: true,
            checks: vec![],
            extract: vec![],
            think: None,
            cookies: true,
            follow_redirects: follow,
        }
    }

    #[test]
    fn a_post_that_follows_gets_a_get_hop_and_one_with_its_own_method_and_a_get_gets_one() {
        let mix = Mix { requests: vec![step("POST", 3), step("GET", 0), step("GET", 5)], order: Order::InTurn };
        let hops = Hops::of(&mix);
        let sent: Vec<(&str, &str, usize)> =
            hops.requests().map(|r| (r.spec.method.as_str(), r.path_and_query.as_str(), r.spec.body.len())).collect();
        assert_eq!(sent, [("GET", "{{@location}}", 0), ("POST", "{{@location}}", 2), ("GET", "{{@location}}", 0)]);
        let get = hops.requests().next().expect("a hop");
        assert_eq!(
            get.spec.headers,
            [("x-user".to_string(), "{{vu}}".to_string())],
            "no body, nothing to describe one"
        );
        assert_eq!(get.name, "login", "counted under its step's name");
        let follows = &hops.follows;
        assert_eq!(follows[0], Some(Follow { limit: 3, get: 3, same: 4 }));
        assert_eq!(follows[1], None);
        assert_eq!(follows[2], Some(Follow { limit: 5, get: 5, same: 5 }));
        assert_eq!(&follows[3..], [follows[0], follows[0], follows[2]], "a hop follows as its step does");
        assert_eq!(hops.extended(vec!["a", "b", "c"]), ["a", "b", "c", "a", "a", "c"]);
        assert!(hops.extended(Vec::<u8>::new()).is_empty());
        assert!(!Hops::of(&Mix { requests: vec![step("GET", 0)], order: Order::InTurn }).any());
    }

    #[test]
    fn a_redirect_is_followed_by_its_statuss_hop_up_to_the_limit_and_a_hop_reads_its_own_url() {
        let mix = Mix { requests: vec![step("POST", 2), step("GET", 0)], order: Order::InTurn };
        let hops = Hops::of(&mix);
        let origin = Target::parse("http://127.0.0.1:8080/").expect("origin");
        let redirects = hops.redirects(&origin, &["/account/login", "/"], 9).expect("one step follows");
        let hop = |request, status, location: &str, hops, current: Option<&Url>| {
            redirects
                .next_hop(request, status, location.as_bytes(), hops, current)
                .map(|(h, url)| (h, path_and_query(&url).to_string()))
        };
        assert_eq!(hop(0, 302, "home", 0, None), Some((2, "/account/home".into())));
        assert_eq!(hop(0, 307, "/again", 1, None), Some((3, "/again".into())), "the POST again");
        assert_eq!(hop(0, 302, "/home", 2, None), None, "its limit is 2");
        assert_eq!(hop(0, 200, "/home", 0, None), None);
        assert_eq!(hop(1, 302, "/home", 0, None), None, "it does not follow");
        let at = Url::parse("http://127.0.0.1:8080/deep/er/page").expect("url");
        assert_eq!(hop(2, 303, "next", 1, Some(&at)), Some((2, "/deep/er/next".into())));
        assert_eq!(hop(3, 302, "/x", 0, Some(&at)), Some((2, "/x".into())), "the POST's hop follows on with a GET");
        assert!(
            Hops::of(&Mix { requests: vec![step("GET", 0)], order: Order::InTurn })
                .redirects(&origin, &["/"], 0)
                .is_none()
        );
    }

    #[test]
    fn statuses_pick_their_hop_and_others_are_not_followed() {
        let follow = Follow { limit: 1, get: 7, same: 8 };
        let hops: Vec<Option<u32>> = [301, 302, 303, 307, 308, 300, 304, 200].map(|s| follow.hop_for(s)).into();
        assert_eq!(hops, [Some(7), Some(7), Some(7), Some(8), Some(8), None, None, None]);
    }

    #[test]
    fn locations_resolve_against_the_request_and_only_the_runs_origin_is_followed() {
        let origin = Url::parse("http://127.0.0.1:8080/").expect("url");
        let base = Url::parse("http://127.0.0.1:8080/account/login?next=1").expect("url");
        let to = |location: &str| resolve(location.as_bytes(), &base, &origin).map(|u| path_and_query(&u).to_string());
        assert_eq!(to("/home"), Some("/home".into()));
        assert_eq!(to(" /home?tab=2#top "), Some("/home?tab=2".into()), "the fragment is the client's");
        assert_eq!(to("welcome"), Some("/account/welcome".into()));
        assert_eq!(to("../up"), Some("/up".into()));
        assert_eq!(to("http://127.0.0.1:8080/abs"), Some("/abs".into()));
        assert_eq!(to("//127.0.0.1:8080/x"), Some("/x".into()));
        assert_eq!(to("http://127.0.0.1:9090/x"), None, "another port");
        assert_eq!(to("https://127.0.0.1:8080/x"), None, "another scheme");
        assert_eq!(to("http://example.com/x"), None, "another host");
        assert_eq!(to("/a b"), Some("/a%20b".into()), "a blank is encoded, as a browser does");
        assert_eq!(resolve(b"\xff", &base, &origin), None);
    }
}
