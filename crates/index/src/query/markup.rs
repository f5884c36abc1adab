//! What an issue's markup does to a query: HTML comments hold the issue template's
//! instructions, which the issue's reader never sees, and are removed; a link to a file of a
//! repository (`https://github.com/o/r/blob/REF/src/a.rs#L10`) names code and becomes its path
//! and line (`src/a.rs:10`), which the analysis reads like any other. Other links stay: a
//! specification's URL is often cited in the code that implements it. Task lists (a template's
//! checklist) stay too: removing them measured worse on the issue-text set (docs/retrieval.md).

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

static COMMENT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?s)<!--.*?(?:-->|\z)").ok());
static FILE_LINK: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"https?://(?:github\.com|gitlab\.com)/[^/\s]+/[^/\s]+(?:/-)?/(?:blob|tree)/[^/\s]+/([^\s#?)\]>]+)(?:\?[^\s#)\]>]*)?(?:#L(\d+)[^\s)\]>]*)?",
    )
    .ok()
});

/// `query` without HTML comments and with links to repository files replaced by their
/// `path[:line]`. Borrowed when there is neither.
pub fn strip(query: &str) -> Cow<'_, str> {
    let mut text = Cow::Borrowed(query);
    if query.contains("<!--")
        && let Some(r) = COMMENT.as_ref()
    {
        text = Cow::Owned(r.replace_all(&text, "").into_owned());
    }
    if text.contains("://")
        && let Some(r) = FILE_LINK.as_ref()
        && r.is_match(&text)
    {
        text = Cow::Owned(
            r.replace_all(&text, |c: &regex::Captures<'_>| {
                let path = c.get(1).map_or("", |m| m.as_str());
                match c.get(2) {
                    Some(line) => format!("{path}:{}", line.as_str()),
                    None => path.to_string(),
                }
            })
            .into_owned(),
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::strip;

    #[test]
    fn comments_go_and_file_links_become_paths() {
        let issue = "<!-- Please search the existing issues first. -->\n\
            Panic in getaddrinfo on Windows\n\
            - [x] I've checked the [docs](https://example.org/docs/intro.html).\n\
            See https://github.com/libuv/libuv/blob/v1.x/src/win/getaddrinfo.c#L120-L130 and \
            <https://gitlab.com/o/r/-/tree/main/src/unix/core.c>.\n\
            <!-- unterminated";
        assert_eq!(
            strip(issue),
            "\nPanic in getaddrinfo on Windows\n\
             - [x] I've checked the [docs](https://example.org/docs/intro.html).\n\
             See src/win/getaddrinfo.c:120 and <src/unix/core.c>.\n"
        );
    }

    #[test]
    fn text_without_comments_or_file_links_is_borrowed_unchanged() {
        for q in [
            "fix the retry loop in client.rs (see [the docs] below)",
            "Spec: https://html.spec.whatwg.org/multipage/parsing.html#parsing-main-inforeign",
            "https://github.com/o/r/issues/12 crashes",
        ] {
            assert!(
                matches!(strip(q), std::borrow::Cow::Borrowed(s) if s == q),
                "{q}"
            );
        }
    }
}
