mod fixtures;
mod json;
mod spread;
mod text;
mod volumes;
