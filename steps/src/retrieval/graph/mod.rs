//! A knowledge graph read from the notes as they are (see [`extract`]):
//! nodes are notes and the people, teams, services, repos and tickets they
//! name; each edge keeps the note and line it comes from, so an answer
//! built on it can cite it. It is kept beside the full-text index, in a
//! file of its own, and brought up to date with it note by note ([`store`]);
//! [`walk`] answers neighbours, backlinks, typed edges, paths and
//! transitive closure with a depth limit; [`ask`] reads a question as
//! such a query.

pub mod ask;
pub mod extract;
pub mod store;
pub mod walk;
