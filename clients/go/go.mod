module jqjail.dev/jqjail

go 1.19
