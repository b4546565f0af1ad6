//! HTML escaping for the reports' pages (`offload analyze --html`,
//! `offload lab --html`).

/// Escapes `s` for HTML text and for attribute values in either quote:
/// `&`, `<`, `>`, `"` and `'` become character references, as the HTML
/// standard's serialisation does for text and attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_and_both_quotes_once() {
        assert_eq!(
            escape(r#"<a href="x" title='y'>&amp;</a>"#),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;"
        );
        assert_eq!(escape("plain text é"), "plain text é");
        assert_eq!(escape(""), "");
    }
}
