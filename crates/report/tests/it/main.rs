mod spread;
