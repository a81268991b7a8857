module @jit_step attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=2, "model"=4]> {stablehlo.mesh = {axes = [{name = "data", size = 2 : i64}, {name = "model", size = 4 : i64}]}}
  func.func public @main(%arg0: tensor<16x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg1: tensor<64x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}, %arg2: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg3: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}) -> (tensor<16x64xf32> {jax.result_info = "result[0]"}, tensor<64x16xf32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.dot_general %arg2, %arg0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
    %1 = stablehlo.multiply %0, %0 : tensor<8x64xf32>
    %2 = stablehlo.multiply %1, %0 : tensor<8x64xf32>
    %3 = stablehlo.multiply %0, %0 : tensor<8x64xf32>
    %cst = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %5 = stablehlo.multiply %4, %3 : tensor<8x64xf32>
    %cst_0 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %7 = stablehlo.multiply %6, %2 : tensor<8x64xf32>
    %8 = stablehlo.add %0, %7 : tensor<8x64xf32>
    %cst_1 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %10 = stablehlo.multiply %9, %8 : tensor<8x64xf32>
    %11 = stablehlo.tanh %10 : tensor<8x64xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %12 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %13 = stablehlo.subtract %12, %11 : tensor<8x64xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %15 = stablehlo.add %14, %11 : tensor<8x64xf32>
    %cst_4 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %17 = stablehlo.multiply %16, %15 : tensor<8x64xf32>
    %18 = stablehlo.multiply %0, %17 : tensor<8x64xf32>
    %19 = stablehlo.dot_general %18, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
    %20 = stablehlo.subtract %19, %arg3 : tensor<8x16xf32>
    %cst_5 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<8x16xf32>
    %22 = stablehlo.multiply %21, %20 : tensor<8x16xf32>
    %cst_6 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %cst_7 = stablehlo.constant dense<1.280000e+02> : tensor<f32>
    %23 = stablehlo.divide %cst_6, %cst_7 : tensor<f32>
    %24 = stablehlo.broadcast_in_dim %23, dims = [] : (tensor<f32>) -> tensor<8x16xf32>
    %25 = stablehlo.multiply %24, %22 : tensor<8x16xf32>
    %26 = stablehlo.dot_general %25, %18, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<8x64xf32>) -> tensor<16x64xf32>
    %27 = stablehlo.transpose %26, dims = [1, 0] : (tensor<16x64xf32>) -> tensor<64x16xf32>
    %28 = stablehlo.dot_general %25, %arg1, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
    %29 = stablehlo.multiply %0, %28 : tensor<8x64xf32>
    %30 = stablehlo.multiply %28, %17 : tensor<8x64xf32>
    %cst_8 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %31 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %32 = stablehlo.multiply %31, %29 : tensor<8x64xf32>
    %33 = stablehlo.multiply %32, %13 : tensor<8x64xf32>
    %34 = stablehlo.multiply %33, %11 : tensor<8x64xf32>
    %35 = stablehlo.add %33, %34 : tensor<8x64xf32>
    %cst_9 = stablehlo.constant dense<0.797884583> : tensor<f32>
    %36 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %37 = stablehlo.multiply %36, %35 : tensor<8x64xf32>
    %38 = stablehlo.add %30, %37 : tensor<8x64xf32>
    %cst_10 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
    %39 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %40 = stablehlo.multiply %39, %37 : tensor<8x64xf32>
    %41 = stablehlo.multiply %40, %5 : tensor<8x64xf32>
    %42 = stablehlo.add %38, %41 : tensor<8x64xf32>
    %43 = stablehlo.dot_general %42, %arg2, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x64xf32>, tensor<8x16xf32>) -> tensor<64x16xf32>
    %44 = stablehlo.transpose %43, dims = [1, 0] : (tensor<64x16xf32>) -> tensor<16x64xf32>
    %cst_11 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %45 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<16x64xf32>
    %46 = stablehlo.multiply %45, %44 : tensor<16x64xf32>
    %47 = stablehlo.subtract %arg0, %46 : tensor<16x64xf32>
    %cst_12 = stablehlo.constant dense<1.000000e-01> : tensor<f32>
    %48 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<64x16xf32>
    %49 = stablehlo.multiply %48, %27 : tensor<64x16xf32>
    %50 = stablehlo.subtract %arg1, %49 : tensor<64x16xf32>
    return %47, %50 : tensor<16x64xf32>, tensor<64x16xf32>
  }
}
