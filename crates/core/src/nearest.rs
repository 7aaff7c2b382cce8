//! The nearest of a few known words to one a person typed: what a warning
//! or a refusal offers as "did you mean" (a mistyped variable, an approval
//! file whose id is a digit off).
//!
//! Invariants: distances are Levenshtein's, in characters; nothing here
//! decides anything, it only names a suggestion.

/// Levenshtein's distance between `a` and `b`, in characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Whether `a` and `b` are at most one edit apart (a character changed,
/// added or removed): linear, where [`edit_distance`] fills a table.
pub fn within_one_edit(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let (short, long) = if a.len() <= b.len() { (&a, &b) } else { (&b, &a) };
    if long.len() - short.len() > 1 {
        return false;
    }
    let Some(first) = short.iter().zip(long.iter()).position(|(x, y)| x != y) else { return true };
    if short.len() == long.len() {
        short[first + 1..] == long[first + 1..]
    } else {
        short[first..] == long[first + 1..]
    }
}

/// The candidate closest to `word` within `at_most` edits (the first of
/// equals, in the order given), if any.
pub fn nearest<'c>(
    word: &str,
    candidates: impl IntoIterator<Item = &'c str>,
    at_most: usize,
) -> Option<&'c str> {
    let mut best: Option<(usize, &str)> = None;
    let length = word.chars().count();
    for candidate in candidates {
        // Lengths further apart than the bound cannot be within it: most
        // candidates cost a length, not a table.
        if candidate.chars().count().abs_diff(length) > at_most {
            continue;
        }
        // One edit, the usual bound, without a table.
        if at_most == 1 && !within_one_edit(word, candidate) {
            continue;
        }
        let d = if at_most == 1 { usize::from(word != candidate) } else { edit_distance(word, candidate) };
        if d <= at_most && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, candidate));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_count_edits_and_the_nearest_is_within_bound() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(nearest("stat", ["state", "stats", "listen"], 1), Some("state"));
        assert_eq!(nearest("zzzz", ["state", "listen"], 1), None);
        for (a, b) in [("abc", "abc"), ("abc", "abd"), ("abc", "ab"), ("abc", "xabc"), ("", "a")] {
            assert!(within_one_edit(a, b) && within_one_edit(b, a), "{a} {b}");
            assert!(edit_distance(a, b) <= 1);
        }
        for (a, b) in [("abc", "acb"), ("abc", "a"), ("abcd", "xbcx")] {
            assert!(!within_one_edit(a, b) && !within_one_edit(b, a), "{a} {b}");
            assert!(edit_distance(a, b) > 1);
        }
    }
}
