//! Retrieval over notes: the [`kb`] index and search, dense [`embed`]dings,
//! [`rank`] fusion and reranking, [`query`] analysis (with spoken [`dates`])
//! [`context`] packing, checkable [`answer`]s, and the [`hits`] they pass
//! along.

pub mod answer;
pub mod context;
pub mod dates;
pub mod embed;
pub mod frontmatter;
pub mod graph;
pub mod hits;
pub mod kb;
pub mod query;
pub mod rank;
pub mod syntax;
