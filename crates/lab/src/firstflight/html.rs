//! Finding what a page makes a browser fetch for its first view: stylesheets, scripts,
//! images, icons and preloads named by `src`, `href` and `srcset` (first candidate).
//!
//! A small hand-written tag scanner, not an HTML parser: it skips comments and the content
//! of raw-text elements (script, style, textarea …) so markup inside them is not mistaken
//! for tags, and it reports `<base href>`. It never fails and never reads past its input;
//! at most [`MAX_REFERENCES`] references are kept.

use serde::Serialize;

/// Most references kept from one page; the scan stops there and says so.
pub const MAX_REFERENCES: usize = 100;

/// Elements whose content is text, not markup, up to their end tag (HTML §13.1.2).
const RAW_TEXT: &[&str] = &[
    "script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript",
    "template",
];

/// What a reference is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Stylesheet,
    Script,
    Image,
    Icon,
    Preload,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Stylesheet => "stylesheet",
            Kind::Script => "script",
            Kind::Image => "image",
            Kind::Icon => "icon",
            Kind::Preload => "preload",
        }
    }
}

/// One reference as written in the page (character references decoded, not resolved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub kind: Kind,
    pub url: String,
}

/// What a scan found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// The first `<base href>`, which relative references resolve against.
    pub base: Option<String>,
    pub references: Vec<Reference>,
    /// More than [`MAX_REFERENCES`] were found; the rest are not listed.
    pub truncated: bool,
}

/// Scans `html` for the references a first view fetches, in document order.
pub fn scan(html: &[u8]) -> Scan {
    let mut out = Scan::default();
    let mut i = 0;
    while let Some(lt) = memchr::memchr(b'<', &html[i..]) {
        i += lt + 1;
        let rest = &html[i..];
        if rest.starts_with(b"!--") {
            i = find(html, i + 3, b"-->").map_or(html.len(), |p| p + 3);
            continue;
        }
        if !rest.first().is_some_and(u8::is_ascii_alphabetic) {
            // End tags, `<!DOCTYPE`, `<?xml`, and a lone `<` in text.
            continue;
        }
        let name_len = rest
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-' || **b == b':')
            .count();
        let name = String::from_utf8_lossy(&rest[..name_len]).to_ascii_lowercase();
        let (attrs, end) = attributes(html, i + name_len);
        i = end;
        if name == "base" && out.base.is_none() {
            out.base = attr(&attrs, "href").map(str::to_string);
        }
        if let Some(reference) = reference(&name, &attrs) {
            if out.references.len() == MAX_REFERENCES {
                out.truncated = true;
                return out;
            }
            out.references.push(reference);
        }
        if RAW_TEXT.contains(&name.as_str()) {
            i = end_tag(html, i, &name);
        }
    }
    out
}

/// The reference an element makes, if it makes one a first view fetches.
fn reference(element: &str, attrs: &[(String, String)]) -> Option<Reference> {
    let (kind, url) = match element {
        "link" => {
            let rel = attr(attrs, "rel")?.to_ascii_lowercase();
            let rel: Vec<&str> = rel.split_ascii_whitespace().collect();
            // `alternate stylesheet` is not applied, `prefetch` is for a later navigation.
            let kind = if rel.contains(&"alternate") {
                return None;
            } else if rel.contains(&"stylesheet") {
                Kind::Stylesheet
            } else if rel.contains(&"preload") || rel.contains(&"modulepreload") {
                Kind::Preload
            } else if rel.contains(&"icon") {
                Kind::Icon
            } else {
                return None;
            };
            (kind, attr(attrs, "href")?)
        }
        // A browser that runs modules skips `nomodule` scripts.
        "script" if attr(attrs, "nomodule").is_none() => (Kind::Script, attr(attrs, "src")?),
        "img" => match attr(attrs, "src").filter(|s| !s.trim().is_empty()) {
            Some(src) => (Kind::Image, src),
            None => (Kind::Image, first_srcset_url(attr(attrs, "srcset")?)?),
        },
        // `<picture><source srcset>`; audio and video sources are not part of a first view.
        "source" => (Kind::Image, first_srcset_url(attr(attrs, "srcset")?)?),
        "input" if attr(attrs, "type").is_some_and(|t| t.eq_ignore_ascii_case("image")) => {
            (Kind::Image, attr(attrs, "src")?)
        }
        _ => return None,
    };
    let url = url.trim();
    (!url.is_empty()).then(|| Reference {
        kind,
        url: url.to_string(),
    })
}

/// The URL of the first candidate of a `srcset` (HTML §4.8.4.3.10): skip leading whitespace
/// and commas, take up to whitespace, drop trailing commas.
fn first_srcset_url(srcset: &str) -> Option<&str> {
    let s = srcset.trim_start_matches(|c: char| c.is_ascii_whitespace() || c == ',');
    let end = s.find(|c: char| c.is_ascii_whitespace()).unwrap_or(s.len());
    let url = s[..end].trim_end_matches(',');
    (!url.is_empty()).then_some(url)
}

/// The first attribute named `name` (HTML keeps the first of duplicates).
fn attr<'a>(attrs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Parses attributes from `i` (just after the tag name) to the `>` that ends the tag;
/// returns them (names lower-cased, values decoded) and the offset after the `>`.
fn attributes(html: &[u8], mut i: usize) -> (Vec<(String, String)>, usize) {
    let mut attrs = Vec::new();
    loop {
        while i < html.len() && (html[i].is_ascii_whitespace() || html[i] == b'/') {
            i += 1;
        }
        match html.get(i) {
            None => return (attrs, html.len()),
            Some(b'>') => return (attrs, i + 1),
            Some(_) => {}
        }
        // The first byte is part of the name even if it is `=` (HTML §13.2.5.32).
        let start = i;
        i += 1;
        while i < html.len()
            && !html[i].is_ascii_whitespace()
            && !matches!(html[i], b'/' | b'>' | b'=')
        {
            i += 1;
        }
        let name = String::from_utf8_lossy(&html[start..i]).to_ascii_lowercase();
        while i < html.len() && html[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if html.get(i) == Some(&b'=') {
            i += 1;
            while i < html.len() && html[i].is_ascii_whitespace() {
                i += 1;
            }
            let (raw, next) = match html.get(i) {
                Some(&q @ (b'"' | b'\'')) => {
                    let close = memchr::memchr(q, &html[i + 1..]).map_or(html.len(), |p| i + 1 + p);
                    (&html[i + 1..close], (close + 1).min(html.len()))
                }
                _ => {
                    let end = html[i..]
                        .iter()
                        .position(|b| b.is_ascii_whitespace() || *b == b'>')
                        .map_or(html.len(), |p| i + p);
                    (&html[i..end], end)
                }
            };
            value = decode_references(&String::from_utf8_lossy(raw));
            i = next;
        }
        attrs.push((name, value));
    }
}

/// The offset of `</name` (case-insensitive) at or after `from`, or the end of input.
fn end_tag(html: &[u8], from: usize, name: &str) -> usize {
    let mut i = from;
    while let Some(p) = find(html, i, b"</") {
        let after = &html[p + 2..];
        if after.len() >= name.len() && after[..name.len()].eq_ignore_ascii_case(name.as_bytes()) {
            return p;
        }
        i = p + 2;
    }
    html.len()
}

fn find(html: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(&html[from.min(html.len())..], needle).map(|p| from + p)
}

/// Decodes the character references that appear in URLs: `&amp;` and friends, `&#N;`,
/// `&#xH;`. Others are left as written.
fn decode_references(s: &str) -> String {
    const NAMED: &[(&str, char)] = &[
        ("amp;", '&'),
        ("lt;", '<'),
        ("gt;", '>'),
        ("quot;", '"'),
        ("apos;", '\''),
    ];
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp + 1..];
        if let Some((entity, c)) = NAMED.iter().find(|(e, _)| rest.starts_with(e)) {
            out.push(*c);
            rest = &rest[entity.len()..];
            continue;
        }
        let numeric = rest.strip_prefix('#').and_then(|r| {
            let semi = r.find(';')?;
            let (digits, radix) = match r.strip_prefix(['x', 'X']) {
                Some(hex) => (&hex[..semi - 1], 16),
                None => (&r[..semi], 10),
            };
            let c = char::from_u32(u32::from_str_radix(digits, radix).ok()?)?;
            Some((c, semi + 2))
        });
        match numeric {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => out.push('&'),
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(html: &str) -> Vec<(Kind, String)> {
        scan(html.as_bytes())
            .references
            .into_iter()
            .map(|r| (r.kind, r.url))
            .collect()
    }

    #[test]
    fn element_table() {
        use Kind::*;
        // (markup, what it references)
        let rows: &[(&str, &[(Kind, &str)])] = &[
            (
                r#"<link rel="stylesheet" href="/a.css">"#,
                &[(Stylesheet, "/a.css")],
            ),
            (
                r#"<LINK REL=StyleSheet HREF=/a.css>"#,
                &[(Stylesheet, "/a.css")],
            ),
            (
                r#"<link href='/a.css' rel='stylesheet'/>"#,
                &[(Stylesheet, "/a.css")],
            ),
            (r#"<link rel="alternate stylesheet" href="/alt.css">"#, &[]),
            (
                r#"<link rel="preload" as="font" href="/f.woff2">"#,
                &[(Preload, "/f.woff2")],
            ),
            (
                r#"<link rel="modulepreload" href="/m.js">"#,
                &[(Preload, "/m.js")],
            ),
            (
                r#"<link rel="shortcut icon" href="/favicon.ico">"#,
                &[(Icon, "/favicon.ico")],
            ),
            (r#"<link rel="canonical" href="/page">"#, &[]),
            (r#"<link rel="prefetch" href="/next.html">"#, &[]),
            (r#"<link rel="dns-prefetch" href="//cdn.example">"#, &[]),
            (r#"<script src="/b.js"></script>"#, &[(Script, "/b.js")]),
            (
                r#"<script type=module src=/m.js></script>"#,
                &[(Script, "/m.js")],
            ),
            (r#"<script nomodule src="/legacy.js"></script>"#, &[]),
            (r#"<script>var x = 1;</script>"#, &[]),
            (r#"<img src="c.png">"#, &[(Image, "c.png")]),
            (r#"<img src=c.png alt=x>"#, &[(Image, "c.png")]),
            (
                r#"<img srcset="s1.png 1x, s2.png 2x">"#,
                &[(Image, "s1.png")],
            ),
            (
                r#"<img src="" srcset=" ,s1.png, s2.png 2x">"#,
                &[(Image, "s1.png")],
            ),
            (r#"<img alt="no source">"#, &[]),
            (
                r#"<picture><source srcset="p.webp" type="image/webp"><img src="p.jpg"></picture>"#,
                &[(Image, "p.webp"), (Image, "p.jpg")],
            ),
            (r#"<video><source src="v.mp4"></video>"#, &[]),
            (
                r#"<input type="image" src="/go.png">"#,
                &[(Image, "/go.png")],
            ),
            (r#"<input type="text" src="/no.png">"#, &[]),
            (r#"<a href="/link.html">x</a>"#, &[]),
            (
                r#"<img src="/i.png?a=1&amp;b=2">"#,
                &[(Image, "/i.png?a=1&b=2")],
            ),
            (r#"<img src="/&#105;.png">"#, &[(Image, "/i.png")]),
            (r#"<img src="/&#x69;.png">"#, &[(Image, "/i.png")]),
            (r#"<img src="/a&b.png">"#, &[(Image, "/a&b.png")]),
            (
                r#"<img src="/first.png" src="/second.png">"#,
                &[(Image, "/first.png")],
            ),
            (
                r#"<img src = "  /spaced.png  " >"#,
                &[(Image, "/spaced.png")],
            ),
        ];
        for (markup, want) in rows {
            let want: Vec<(Kind, String)> = want.iter().map(|(k, u)| (*k, u.to_string())).collect();
            assert_eq!(refs(markup), want, "{markup}");
        }
    }

    #[test]
    fn text_that_is_not_markup_is_skipped() {
        let rows: &[(&str, &[&str])] = &[
            (
                "<!-- <img src=/hidden.png> --><img src=/shown.png>",
                &["/shown.png"],
            ),
            (
                "<script>document.write('<img src=/js.png>')</script><img src=/after.png>",
                &["/after.png"],
            ),
            (
                "<SCRIPT>x = '</scr' + 'ipt>';</SCRIPT ><img src=/a.png>",
                &["/a.png"],
            ),
            ("<style>.a{background:url(<img src=/css.png>)}</style>", &[]),
            ("<textarea><img src=/t.png></textarea>", &[]),
            ("<noscript><img src=/pixel.gif></noscript>", &[]),
            (
                "<title>a < b <img src=/t.png></title><img src=/x.png>",
                &["/x.png"],
            ),
            ("a < b and 1<2 <img src=/y.png>", &["/y.png"]),
            (
                "<!DOCTYPE html><?xml x?></div><img src=/z.png>",
                &["/z.png"],
            ),
        ];
        for (markup, want) in rows {
            let got: Vec<String> = refs(markup).into_iter().map(|(_, u)| u).collect();
            assert_eq!(got, *want, "{markup}");
        }
    }

    #[test]
    fn truncated_input_does_not_panic() {
        let rows = [
            "<",
            "<img",
            "<img src",
            "<img src=",
            "<img src=\"/a",
            "<img src='",
            "<!--",
            "<script>",
            "<script src=/a.js",
            "<img src=/a.png",
            "&",
            "<img src=\"&#\">",
            "<img src=\"&#x;\">",
            "<img src=\"&#99999999999;\">",
            "<img src=\"&#xD800;\">",
        ];
        for markup in rows {
            let _ = scan(markup.as_bytes());
        }
        // An unterminated last tag still counts: a browser would see it at EOF too.
        assert_eq!(
            refs("<img src=/a.png"),
            vec![(Kind::Image, "/a.png".to_string())]
        );
    }

    #[test]
    fn base_href_is_reported_once() {
        let s = scan(b"<base href=\"/static/\"><base href=/other/><img src=a.png>");
        assert_eq!(s.base.as_deref(), Some("/static/"));
        assert_eq!(s.references.len(), 1);
    }

    #[test]
    fn references_are_capped() {
        let page = "<img src=/i.png>".repeat(MAX_REFERENCES + 5);
        let s = scan(page.as_bytes());
        assert_eq!(s.references.len(), MAX_REFERENCES);
        assert!(s.truncated);
        let page = "<img src=/i.png>".repeat(MAX_REFERENCES);
        assert!(!scan(page.as_bytes()).truncated);
    }

    #[test]
    fn srcset_first_candidate_table() {
        let rows: &[(&str, Option<&str>)] = &[
            ("a.png 1x, b.png 2x", Some("a.png")),
            ("  a.png", Some("a.png")),
            (",,a.png,", Some("a.png")),
            ("a.png,b.png 2x", Some("a.png,b.png")),
            ("", None),
            (" , ", None),
        ];
        for &(srcset, want) in rows {
            assert_eq!(first_srcset_url(srcset), want, "{srcset:?}");
        }
    }
}
