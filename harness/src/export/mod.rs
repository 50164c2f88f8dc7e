//! Every rendering of the result model into bytes, in one place: the
//! manifest of a run, the loaded views of `linecard report`, the gate's
//! result and a scenario's plan go in, text comes out. Nothing here
//! measures or judges; a figure printed is a figure of the model.
//!
//! - [`document`]: headings, paragraphs, tables, lists, figures, and their
//!   Markdown and HTML renderings (the only code that knows either syntax);
//! - [`table`]: the bake-off table, defined once, with each view's columns;
//! - [`summary`]: `summary.md` and the sections published pages embed;
//! - [`report`]: `linecard report` (Markdown, HTML; its JSON is the views
//!   serialized, `report::write`);
//! - [`gate`]: the gate's readable diff and its JUnit XML;
//! - [`compare`]: two runs side by side, the verdict and its tests;
//! - [`plan`]: `linecard run --check`.

pub mod compare;
pub mod document;
pub mod gate;
pub mod ladder;
pub mod plan;
pub mod report;
pub mod summary;
pub mod table;
