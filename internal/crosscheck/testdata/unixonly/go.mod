module example.com/unixonly

go 1.22
