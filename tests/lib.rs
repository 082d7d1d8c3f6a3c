//! End-to-end tests: the real `marktoflow` binary, real scripts in boa, a
//! fake LLM server on 127.0.0.1 standing in for the paid providers.

mod fake_llm;
mod fake_service;
mod support;

mod agent;
mod api;
mod approvals;
mod builtins;
mod cli;
mod console;
mod dense;
mod errors;
mod examples;
mod flagship;
mod fuzz;
mod graph;
mod integrations;
mod local_model;
mod mcp;
mod memory;
mod postgres;
mod readme;
mod retrieval;
mod robots;
mod sandbox;
mod script_tool;
mod seed_workflows;
mod server;
mod store;
mod tenants;
mod testing;
mod traces;
mod transcripts;
mod workflows;
