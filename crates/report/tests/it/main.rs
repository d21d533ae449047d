mod spread;
mod volumes;
