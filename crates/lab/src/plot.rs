//! Chart plumbing shared by the lab tools: the embedded font and the output formats.
//!
//! plotters draws text through ab_glyph from a font we register ourselves, so a PNG gets its
//! labels on a host without fontconfig or system fonts (CI's clean machine). The font is DejaVu
//! Sans (Bitstream Vera licence, `assets/DejaVuSans.LICENSE`). Every tool asks for its charts via
//! [`init`] once before drawing; the family name to use in styles is [`FONT`].

use std::sync::Once;

/// Font family name to pass to plotters text styles (`(FONT, 16).into_font()`).
pub const FONT: &str = "sans-serif";

static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Registers the embedded font with plotters (idempotent, thread-safe).
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is a known-good TTF compiled in; failing to parse it is a build defect.
        if plotters::style::register_font(FONT, plotters::style::FontStyle::Normal, FONT_BYTES)
            .is_err()
        {
            panic!("embedded DejaVuSans.ttf failed to load");
        }
    });
}

#[cfg(test)]
mod tests {
    use plotters::prelude::*;

    #[test]
    fn png_with_text_renders() {
        super::init();
        let dir = std::env::temp_dir().join(format!("linerate-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.png");
        {
            let root = BitMapBackend::new(&path, (200, 100)).into_drawing_area();
            root.fill(&WHITE).unwrap();
            root.draw(&Text::new("req/s", (10, 10), (super::FONT, 20).into_font()))
                .unwrap();
            root.present().unwrap();
        }
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
