mod model;
mod special;
mod versus_host;
mod xattr;
