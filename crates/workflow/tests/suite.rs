mod load;
