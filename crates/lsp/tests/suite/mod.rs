mod rust;
