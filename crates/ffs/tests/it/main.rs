mod common;
mod files;
mod fsck;
mod fuzz;
mod model;
mod superblock;
