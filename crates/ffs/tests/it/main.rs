mod common;
mod files;
mod fsck;
mod fuzz;
mod inode;
mod model;
mod special;
mod superblock;
