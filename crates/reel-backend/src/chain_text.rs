//! An error and its causes as one line of text.

/// The texts of an error chain, outermost first, joined by ": ", each left out when the text so
/// far has it already. Several errors name their source in their own message and also return
/// it as `source()` (an S3 failure read "S3 GET: …: S3 GET: …"), and an `io::Error`'s text is
/// the text of the error it wraps. For the `reel` binary's messages (over anyhow's chain) and
/// the S3 client's transport errors alike.
pub fn chain_text<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut text = String::new();
    for err in chain {
        let part = err.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}
