mod model;
mod versus_host;
