mod bonnie;
mod engine;
mod gen;
mod spec;
mod validate;
