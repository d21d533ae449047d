mod config;
