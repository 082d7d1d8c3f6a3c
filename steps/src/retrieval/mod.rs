//! Retrieval over notes: the [`kb`] index and search, dense [`embed`]dings,
//! [`rank`] fusion and reranking, [`query`] analysis (with spoken [`dates`])
//! [`context`] packing, and checkable [`answer`]s.

pub mod answer;
pub mod context;
pub mod dates;
pub mod embed;
pub mod kb;
pub mod query;
pub mod rank;
pub mod syntax;
