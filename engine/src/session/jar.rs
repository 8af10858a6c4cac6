//! A virtual user's cookie jar: the cookies the answers to its scenario's steps set, sent back
//! with its later requests where RFC 6265 says (domain and path matching, expiry, Secure only
//! over TLS or to loopback, as browsers do; HttpOnly does not concern an HTTP client), kept by
//! cookie_store.
//!
//! A request whose step sets its own Cookie field is sent as written: the jar adds nothing to it
//! (HTTP/1.1 allows one such field), though it keeps what the answer sets.
//!
//! A request is matched by a URL fixed before the load starts: the run's origin and its path.
//! A templated path is matched by its text before its first `{{`, since what fills its slots
//! changes with every request; a cookie scoped to a path under that prefix is not sent to it.

use cookie_store::CookieStore;
use url::Url;

use crate::target::Target;

/// Per request, the URL its cookies are matched against, and whether the jar adds them to it;
/// None: its jar is off.
#[derive(Debug, Clone)]
pub(crate) struct CookieUrls(Box<[Option<(Url, bool)>]>);

impl CookieUrls {
    /// `requests`: each request's path (with its query), whether its jar is on, and whether
    /// it sets its own Cookie field; None when no request's jar is on.
    pub(crate) fn new<'a>(
        origin: &Target,
        requests: impl Iterator<Item = (&'a str, bool, bool)>,
    ) -> Option<CookieUrls> {
        let urls: Box<[Option<(Url, bool)>]> =
            requests.map(|(path, on, own)| on.then(|| origin.url_of(path)).flatten().map(|url| (url, !own))).collect();
        urls.iter().any(Option::is_some).then_some(CookieUrls(urls))
    }

    /// Request `request`'s URL, if its jar keeps what its answers set.
    #[inline]
    pub(crate) fn get(&self, request: u32) -> Option<&Url> {
        self.0.get(request as usize).and_then(Option::as_ref).map(|(url, _)| url)
    }

    /// Request `request`'s URL, if its jar adds cookies to it.
    #[inline]
    pub(crate) fn sends(&self, request: u32) -> Option<&Url> {
        self.0.get(request as usize).and_then(Option::as_ref).filter(|(_, sends)| *sends).map(|(url, _)| url)
    }
}

/// One user's cookies.
#[derive(Debug, Clone, Default)]
pub(crate) struct Jar {
    store: CookieStore,
}

impl Jar {
    /// Keeps what `set_cookies` (the values of a response's `set-cookie` fields) set, answered
    /// to a request to `url`. A value that is not a cookie, or one RFC 6265 has a user agent
    /// ignore (its Domain not the origin's, say), is left out, as a browser would.
    pub(crate) fn store(&mut self, set_cookies: &[Vec<u8>], url: &Url) {
        for value in set_cookies {
            if let Ok(text) = std::str::from_utf8(value) {
                // Refused ones are RFC 6265's to ignore; nothing is counted against the run.
                let _ = self.store.parse(text, url);
            }
        }
    }

    /// The value of the Cookie field a request to `url` carries, into `out` (emptied first):
    /// each cookie that matches as `name=value`, joined by `; `, those with longer paths first
    /// (RFC 6265 §5.4). Empty when none does.
    pub(crate) fn header(&self, url: &Url, out: &mut Vec<u8>) {
        out.clear();
        let mut cookies = self.store.matches(url);
        // By the path the cookie is scoped to (its Path attribute, or the default RFC 6265 §5.1.4
        // derives from the URL that set it).
        cookies.sort_by_key(|c| std::cmp::Reverse(c.path.as_ref().len()));
        for (name, value) in cookies.iter().map(|c| c.name_value()) {
            if !out.is_empty() {
                out.extend_from_slice(b"; ");
            }
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            out.extend_from_slice(value.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(origin: &str, paths: &[(&str, bool)]) -> Option<CookieUrls> {
        CookieUrls::new(&Target::parse(origin).expect("origin"), paths.iter().map(|&(p, on)| (p, on, p == "/own")))
    }

    fn header(jar: &Jar, url: &Url) -> String {
        let mut out = Vec::new();
        jar.header(url, &mut out);
        String::from_utf8(out).expect("text")
    }

    fn set(values: &[&str]) -> Vec<Vec<u8>> {
        values.iter().map(|v| v.as_bytes().to_vec()).collect()
    }

    #[test]
    fn requests_are_matched_by_their_origin_and_the_fixed_part_of_their_path() {
        let urls = urls("http://127.0.0.1:8080/", &[("/login?x=1", true), ("/users/{{vu}}/cart", true), ("/a", false)])
            .expect("some jar is on");
        assert_eq!(urls.get(0).map(Url::as_str), Some("http://127.0.0.1:8080/login?x=1"));
        assert_eq!(urls.get(1).map(Url::as_str), Some("http://127.0.0.1:8080/users/"));
        assert_eq!(urls.get(2), None);
        assert_eq!(urls.sends(1).map(Url::as_str), Some("http://127.0.0.1:8080/users/"));
        assert!(self::urls("http://h/", &[("/a", false)]).is_none(), "no jar on, no table");
        let own = self::urls("http://h/", &[("/own", true)]).expect("a jar");
        assert!(own.get(0).is_some() && own.sends(0).is_none(), "its own Cookie field: keeps, adds nothing");
    }

    #[test]
    fn a_cookie_goes_back_where_its_path_and_domain_match_and_not_elsewhere() {
        let urls = urls(
            "http://127.0.0.1:8080/",
            &[("/login", true), ("/api/items", true), ("/other", true), ("/api/{{vu}}", true)],
        )
        .expect("urls");
        let at = |i: u32| urls.get(i).expect("url");
        let mut jar = Jar::default();
        jar.store(&set(&["sid=abc; Path=/; HttpOnly", "api=1; Path=/api", "bad=2; Domain=example.com"]), at(0));
        assert_eq!(header(&jar, at(1)), "api=1; sid=abc", "the longer path first");
        assert_eq!(header(&jar, at(2)), "sid=abc", "api's path does not match /other");
        assert_eq!(header(&jar, at(3)), "api=1; sid=abc", "/api/ is under /api");
        // A later Set-Cookie of the same name, domain and path replaces the value.
        jar.store(&set(&["sid=def; Path=/"]), at(1));
        assert_eq!(header(&jar, at(2)), "sid=def");
    }

    #[test]
    fn a_cookie_without_a_path_is_ordered_by_the_default_path_its_url_gave_it() {
        let urls = urls("http://127.0.0.1/", &[("/account/login", true), ("/account/items", true)]).expect("urls");
        let mut jar = Jar::default();
        // "a" is scoped to /account (RFC 6265 §5.1.4), longer than "b"'s /.
        jar.store(&set(&["b=2; Path=/", "a=1"]), urls.get(0).expect("url"));
        assert_eq!(header(&jar, urls.get(1).expect("url")), "a=1; b=2");
    }

    #[test]
    fn an_expired_cookie_is_removed_and_a_secure_one_stays_off_plain_http() {
        // Loopback counts as secure (as in browsers): a host elsewhere shows the rule.
        let plain = urls("http://example.test:8080/", &[("/", true)]).expect("urls");
        let tls = urls("https://127.0.0.1:8443/", &[("/", true)]).expect("urls");
        let mut jar = Jar::default();
        jar.store(&set(&["a=1; Path=/", "s=2; Path=/; Secure"]), plain.get(0).expect("url"));
        assert_eq!(header(&jar, plain.get(0).expect("url")), "a=1", "Secure is for TLS only");
        let mut jar = Jar::default();
        let url = tls.get(0).expect("url");
        jar.store(&set(&["a=1; Path=/", "s=2; Path=/s; Secure"]), url);
        let url_s = Url::parse("https://127.0.0.1:8443/s").expect("url");
        assert_eq!(header(&jar, &url_s), "s=2; a=1");
        jar.store(&set(&["a=gone; Path=/; Max-Age=0", "s=2; Path=/s; Expires=Thu, 01 Jan 1970 00:00:00 GMT"]), url);
        assert_eq!(header(&jar, &url_s), "");
    }

    #[test]
    fn what_is_not_a_cookie_is_left_out() {
        let urls = urls("http://127.0.0.1/", &[("/", true)]).expect("urls");
        let url = urls.get(0).expect("url");
        let mut jar = Jar::default();
        jar.store(&[b"\xff\xfe=1".to_vec(), b"=novalue".to_vec(), b"ok=1".to_vec()], url);
        assert_eq!(header(&jar, url), "ok=1");
    }
}
