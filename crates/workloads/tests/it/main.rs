mod engine;
mod gen;
mod spec;
