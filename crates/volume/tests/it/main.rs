mod common;
mod config;
mod mirror;
mod props;
mod raid5;
mod striped;
