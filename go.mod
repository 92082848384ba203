module github.com/govm/govm

go 1.26.8
