module example.com/compactlog-go

go 1.19
