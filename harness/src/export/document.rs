//! A document as blocks (headings, paragraphs, tables, lists, figures),
//! and its two renderings: Markdown and self-contained HTML. Every page
//! the product writes for people (`summary.md`, `linecard report`) is
//! built once as blocks; these two functions are the only places that
//! know either syntax.

/// A table column's alignment (numbers right, words left).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// One cell: plain text, a verdict (HTML colours it by its word), or a
/// file the run wrote (Markdown shows its path as code, HTML links it).
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    Text(String),
    Verdict(String),
    File(String),
}

impl Cell {
    pub fn text(&self) -> &str {
        match self {
            Self::Text(t) | Self::Verdict(t) | Self::File(t) => t,
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Self::Text(text.to_string())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    pub header: Vec<(String, Align)>,
    pub rows: Vec<Vec<Cell>>,
}

/// A run of text in a paragraph.
#[derive(Clone, Debug, PartialEq)]
pub enum Inline {
    Text(String),
    Bold(String),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// Level 1 to 3.
    Heading(u8, String),
    Paragraph(Vec<Inline>),
    Table(Table),
    List(Vec<String>),
    /// An inline SVG with its file name and caption (HTML only: Markdown
    /// has the capture's path in the table instead).
    Figure {
        name: String,
        svg: String,
        caption: String,
    },
    /// A folded preformatted text (HTML only).
    Details {
        summary: String,
        text: String,
    },
}

impl Table {
    /// A table with these column names and alignments.
    pub fn new(header: &[(&str, Align)], rows: Vec<Vec<Cell>>) -> Self {
        Self {
            header: header.iter().map(|&(h, a)| (h.to_string(), a)).collect(),
            rows,
        }
    }
}

impl Block {
    /// A paragraph of plain text.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Paragraph(vec![Inline::Text(text.into())])
    }
}

/// Markdown: blocks separated by one blank line; figures and folded text
/// left out.
pub fn markdown(blocks: &[Block]) -> String {
    let rendered: Vec<String> = blocks.iter().filter_map(markdown_block).collect();
    rendered.join("\n")
}

fn markdown_block(block: &Block) -> Option<String> {
    Some(match block {
        Block::Heading(level, text) => {
            format!("{} {text}\n", "#".repeat(usize::from(*level)))
        }
        Block::Paragraph(runs) => {
            let text: String = runs
                .iter()
                .map(|r| match r {
                    Inline::Text(t) => t.clone(),
                    Inline::Bold(t) => format!("**{t}**"),
                })
                .collect();
            format!("{text}\n")
        }
        Block::Table(table) => {
            let mut out = format!(
                "| {} |\n|",
                table
                    .header
                    .iter()
                    .map(|(h, _)| h.as_str())
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
            for (_, align) in &table.header {
                out.push_str(match align {
                    Align::Left => "---|",
                    Align::Right => "---:|",
                });
            }
            out.push('\n');
            for row in &table.rows {
                let cells: Vec<String> = row
                    .iter()
                    .map(|c| match c {
                        Cell::File(path) if path != "-" => format!("`{path}`"),
                        other => other.text().to_string(),
                    })
                    .collect();
                out.push_str(&format!("| {} |\n", cells.join(" | ")));
            }
            out
        }
        Block::List(items) => items.iter().map(|i| format!("- {i}\n")).collect(),
        Block::Figure { .. } | Block::Details { .. } => return None,
    })
}

/// Escapes text for HTML and XML (element content and quoted attributes).
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px}\
.r{text-align:right}.l{text-align:left}\
.pass{color:#070}.fail{color:#b00;font-weight:bold}.invalid{color:#a60;font-weight:bold}.unavailable{color:#666}.measured{color:#333}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto;border:1px solid #eee}pre{background:#f6f6f6;padding:1em;overflow:auto}";

/// The CSS class of a verdict, by its first word.
fn verdict_class(text: &str) -> &'static str {
    if text.starts_with("FAIL") || text == "B worse" {
        "fail"
    } else if text.starts_with("INVALID") {
        "invalid"
    } else if text.starts_with("unavailable") {
        "unavailable"
    } else if text == "measured" {
        "measured"
    } else {
        "pass"
    }
}

/// One self-contained HTML page (inline SVG, no scripts, no network).
pub fn html(title: &str, blocks: &[Block]) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(title)
    );
    for block in blocks {
        out.push_str(&html_block(block));
    }
    out.push_str("</body></html>\n");
    out
}

fn html_block(block: &Block) -> String {
    match block {
        Block::Heading(level, text) => format!("<h{level}>{}</h{level}>\n", esc(text)),
        Block::Paragraph(runs) => {
            let text: String = runs
                .iter()
                .map(|r| match r {
                    Inline::Text(t) => esc(t),
                    Inline::Bold(t) => format!("<b>{}</b>", esc(t)),
                })
                .collect();
            format!("<p>{text}</p>\n")
        }
        Block::Table(table) => {
            let class = |align: Align| match align {
                Align::Left => "l",
                Align::Right => "r",
            };
            let mut out = String::from("<table><tr>");
            for (h, align) in &table.header {
                out.push_str(&format!("<th class=\"{}\">{}</th>", class(*align), esc(h)));
            }
            out.push_str("</tr>\n");
            for row in &table.rows {
                out.push_str("<tr>");
                for (cell, (_, align)) in row.iter().zip(&table.header) {
                    let align = class(*align);
                    out.push_str(&match cell {
                        Cell::Text(t) => format!("<td class=\"{align}\">{}</td>", esc(t)),
                        Cell::Verdict(t) => {
                            format!("<td class=\"{align} {}\">{}</td>", verdict_class(t), esc(t))
                        }
                        Cell::File(path) if path != "-" => format!(
                            "<td class=\"{align}\"><a href=\"file://{}\">pcap</a></td>",
                            esc(path)
                        ),
                        Cell::File(_) => format!("<td class=\"{align}\">-</td>"),
                    });
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</table>\n");
            out
        }
        Block::List(items) => {
            let items: String = items
                .iter()
                .map(|i| format!("<li>{}</li>", esc(i)))
                .collect();
            format!("<ul>{items}</ul>\n")
        }
        Block::Figure { name, svg, caption } => format!(
            "<figure class=\"plot\" data-plot=\"{}\">{svg}<figcaption>{}</figcaption></figure>\n",
            esc(name),
            esc(caption)
        ),
        Block::Details { summary, text } => format!(
            "<details><summary>{}</summary><pre>{}</pre></details>\n",
            esc(summary),
            esc(text)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Block> {
        vec![
            Block::Heading(2, "smoke / 20261205T120000Z".into()),
            Block::Paragraph(vec![
                Inline::Text("Status: ".into()),
                Inline::Bold("complete".into()),
                Inline::Text(". <setup>".into()),
            ]),
            Block::Table(Table {
                header: [
                    ("DUT", Align::Left),
                    ("max ms", Align::Right),
                    ("verdict", Align::Left),
                    ("capture", Align::Left),
                ]
                .map(|(h, a)| (h.to_string(), a))
                .to_vec(),
                rows: vec![vec![
                    "xdp".into(),
                    "10.18".into(),
                    Cell::Verdict("FAIL: 3 flaps".into()),
                    Cell::File("xdp/capture.pcap".into()),
                ]],
            }),
            Block::List(vec!["steal 3 ms".into()]),
            Block::Figure {
                name: "gaps.svg".into(),
                svg: "<svg/>".into(),
                caption: "xdp".into(),
            },
        ]
    }

    #[test]
    fn markdown_has_every_block_but_the_figures() {
        assert_eq!(
            markdown(&sample()),
            "## smoke / 20261205T120000Z\n\n\
             Status: **complete**. <setup>\n\n\
             | DUT | max ms | verdict | capture |\n|---|---:|---|---|\n\
             | xdp | 10.18 | FAIL: 3 flaps | `xdp/capture.pcap` |\n\n\
             - steal 3 ms\n"
        );
    }

    #[test]
    fn html_escapes_text_colours_verdicts_and_links_files() {
        let page = html("linecard report", &sample());
        assert!(page.contains("<p>Status: <b>complete</b>. &lt;setup&gt;</p>"));
        assert!(page.contains("<td class=\"l fail\">FAIL: 3 flaps</td>"));
        assert!(page.contains("<a href=\"file://xdp/capture.pcap\">pcap</a>"));
        assert!(page.contains("<th class=\"r\">max ms</th>"));
        assert!(page.contains("<figure class=\"plot\" data-plot=\"gaps.svg\"><svg/>"));
        assert!(page.ends_with("</body></html>\n"));
    }
}
