mod common;
mod config;
mod mirror;
mod raid5;
mod striped;
