//! Hide IDs: `<sanitized-source>-<hex prefix of sha256(content)>`.
//!
//! The prefix is 8 hex digits unless another hide of the same tenant already holds that ID
//! with different content; then it grows (12, 16, … 64 digits) until it is free. An ID never
//! names two contents, so a put never overwrites.

/// Longest sanitized source kept in an ID.
pub const MAX_SOURCE_CHARS: usize = 32;
/// The source used when the given one has no letters or digits.
pub const DEFAULT_SOURCE: &str = "hide";
/// Hex digits of the hash in a fresh ID.
pub const SHORT_HASH: usize = 8;
/// The longest ID: the source, a dash and a whole sha256 in hex.
pub const MAX_ID_BYTES: usize = MAX_SOURCE_CHARS + 1 + 64;

/// Lowercases and keeps ASCII letters and digits (at most [`MAX_SOURCE_CHARS`]).
pub fn sanitize_source(source: &str) -> String {
    let s: String = source
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .take(MAX_SOURCE_CHARS)
        .collect();
    if s.is_empty() {
        DEFAULT_SOURCE.to_string()
    } else {
        s
    }
}

/// The candidate IDs for content with hash `sha256_hex`, shortest first.
pub fn candidates<'a>(
    source_key: &'a str,
    sha256_hex: &'a str,
) -> impl Iterator<Item = String> + 'a {
    (SHORT_HASH..=64)
        .step_by(4)
        .map(move |n| format!("{source_key}-{}", &sha256_hex[..n]))
}

/// Whether `id` has the shape of an ID: lowercase letters and digits, one dash, hex after it.
/// Anything else is refused before it reaches a query or a path.
pub fn is_well_formed(id: &str) -> bool {
    let Some((source, hash)) = id.rsplit_once('-') else {
        return false;
    };
    id.len() <= MAX_ID_BYTES
        && !source.is_empty()
        && source.len() <= MAX_SOURCE_CHARS
        && source
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && (SHORT_HASH..=64).contains(&hash.len())
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizing() {
        assert_eq!(sanitize_source("GitHub Issues/list!"), "githubissueslist");
        assert_eq!(sanitize_source("../../etc"), "etc");
        assert_eq!(sanitize_source("—"), "hide");
        assert_eq!(sanitize_source(&"A".repeat(100)).len(), MAX_SOURCE_CHARS);
    }

    #[test]
    fn shapes() {
        let hash = "0123456789abcdef".repeat(4);
        let ids: Vec<_> = candidates("gh", &hash).collect();
        assert_eq!(ids[0], "gh-01234567");
        assert_eq!(ids[1], "gh-0123456789ab");
        assert_eq!(ids.last().unwrap(), &format!("gh-{hash}"));
        assert!(ids.iter().all(|id| is_well_formed(id)));
        for bad in [
            "",
            "gh",
            "gh-",
            "-0123abcd",
            "GH-0123abcd",
            "gh-0123abcz",
            "gh-012",
            "../x-0123abcd",
            "a/b-0123abcd",
        ] {
            assert!(!is_well_formed(bad), "{bad}");
        }
    }
}
