use faer::linalg::matmul::triangular::BlockStructure;
use faer::{Accum, Mat, MatMut, MatRef, Par};
use std::time::Instant;
fn main() {
    let (k, m) = (2048usize, 2043usize);
    let phi: Vec<f32> = (0..k * m).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
    let mut out = vec![0f32; m * m];
    let p = MatRef::from_row_major_slice(&phi, k, m);
    let par = Par::rayon(0);
    for rep in 0..3 {
        let t = Instant::now();
        faer::linalg::matmul::triangular::matmul(
            MatMut::from_column_major_slice_mut(&mut out, m, m),
            BlockStructure::TriangularLower, Accum::Replace, p.transpose(), BlockStructure::Rectangular,
            p, BlockStructure::Rectangular, 1.0f32, par);
        let a = t.elapsed().as_secs_f64();
        let t = Instant::now();
        faer::linalg::matmul::matmul(MatMut::from_column_major_slice_mut(&mut out, m, m), Accum::Replace, p.transpose(), p, 1.0f32, par);
        let b = t.elapsed().as_secs_f64();
        // column-major phi^T (m x k) copy
        let pt = Mat::<f32>::from_fn(m, k, |i, j| phi[j * m + i]);
        let t = Instant::now();
        faer::linalg::matmul::matmul(MatMut::from_column_major_slice_mut(&mut out, m, m), Accum::Replace, pt.as_ref(), pt.transpose(), 1.0f32, par);
        let c = t.elapsed().as_secs_f64();
        let t = Instant::now();
        faer::linalg::matmul::triangular::matmul(
            MatMut::from_column_major_slice_mut(&mut out, m, m),
            BlockStructure::TriangularLower, Accum::Replace, pt.as_ref(), BlockStructure::Rectangular,
            pt.transpose(), BlockStructure::Rectangular, 1.0f32, par);
        let d = t.elapsed().as_secs_f64();
        let f = 2.0 * (k * m * m) as f64;
        println!("rep {rep}: tri {a:.3} s ({:.0} GF/s eq), full {b:.3} s ({:.0}), full colmajor {c:.3} ({:.0}), tri colmajor {d:.3}", f / a / 1e9, f / b / 1e9, f / c / 1e9);
    }
    // cholesky f64 m
    let a = Mat::<f64>::from_fn(m, m, |i, j| if i == j { m as f64 } else { 1.0 / (1.0 + (i as f64 - j as f64).abs()) });
    for _ in 0..3 {
        let t = Instant::now();
        let _l = a.llt(faer::Side::Lower).unwrap();
        let e = t.elapsed().as_secs_f64();
        println!("llt f64 {e:.3} s ({:.0} GF/s)", (m * m * m) as f64 / 3.0 / e / 1e9);
        let a32 = Mat::<f32>::from_fn(m, m, |i, j| a[(i, j)] as f32);
        let t = Instant::now();
        let _l = a32.llt(faer::Side::Lower).unwrap();
        let e = t.elapsed().as_secs_f64();
        println!("llt f32 {e:.3} s ({:.0} GF/s)", (m * m * m) as f64 / 3.0 / e / 1e9);
    }
}
