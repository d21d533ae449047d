mod fixtures;
mod json;
mod spread;
mod volumes;
