mod model;
mod range;
mod special;
mod versus_host;
mod xattr;
