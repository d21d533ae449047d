mod fixtures;
mod html;
mod json;
mod spread;
mod text;
mod volumes;
