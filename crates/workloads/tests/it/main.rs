mod bonnie;
mod crash;
mod engine;
mod gen;
mod spec;
mod validate;
