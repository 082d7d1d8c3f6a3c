//! The file format: a Markdown file → [`document`] (frontmatter and step
//! blocks with their positions) → [`model`] (the typed, checked workflow),
//! its [`inputs`], its JSON [`schema`] and its [`graph`].

pub mod document;
pub mod graph;
pub mod inputs;
pub mod model;
pub mod schema;
pub mod yamlhint;
