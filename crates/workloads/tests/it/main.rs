mod bonnie;
mod crash;
mod engine;
mod gen;
mod journal_crash;
mod spec;
mod validate;
