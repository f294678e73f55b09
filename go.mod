module github.com/dledger-go/dledger

go 1.26.8
