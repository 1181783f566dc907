module skipper

go 1.26
